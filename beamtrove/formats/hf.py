"""Telling a folder that holds a Hugging Face dataset, in the layouts :mod:`beamtrove.transforms.readers.hf` reads.

Its Arrow files are Arrow IPC streams (:mod:`beamtrove.formats.ipc`); which
files make a split, and in which order, is what the dataset's JSON files say.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from beamtrove.fs import filesystem

__all__ = ["PREPARED_INFO", "SAVED_SPLITS", "SAVED_STATE", "is_saved_dataset"]

#: What ``save_to_disk`` writes for a dataset of several splits, listing them.
SAVED_SPLITS = "dataset_dict.json"
#: What ``save_to_disk`` writes for one split, listing its files.
SAVED_STATE = "state.json"
#: What ``load_dataset`` writes into the folder it prepares in its cache.
PREPARED_INFO = "dataset_info.json"


def is_saved_dataset(path: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``path`` is a folder holding a dataset in one of the layouts beamtrove reads."""
    fs, fs_path = filesystem(path, storage_options)
    return fs.isdir(fs_path) and any(
        fs.exists(posixpath.join(fs_path, name)) for name in (SAVED_SPLITS, SAVED_STATE, PREPARED_INFO)
    )
