"""Reading Hugging Face datasets kept on this machine into documents, without the ``datasets`` package.

A dataset is stored as Arrow IPC stream files plus JSON files that say which
files hold which split, in one of two layouts:

- what ``Dataset.save_to_disk`` writes: ``state.json`` lists the ``.arrow``
  files in order; ``DatasetDict.save_to_disk`` writes ``dataset_dict.json``
  and one such folder per split;
- what ``load_dataset`` prepares in its cache
  (``$HF_DATASETS_CACHE/<owner>___<name>/<config>/<version>/<hash>/``):
  ``dataset_info.json`` lists the splits and their shard lengths, the files
  are ``<name>-<split>[-NNNNN-of-NNNNN].arrow``. Such a dataset is also
  found by its hub name (``owner/name``), as ``load_dataset`` finds it offline.

Ids and metadata follow DataTrove's ``HuggingFaceDatasetReader`` in a
one-task run: a row without an id becomes ``<dataset>/00000/<row index>``,
where ``<dataset>`` is the hub name or the path of the ``save_to_disk``
folder read, and the row index counts from 0 across the split's files; every
document's metadata gets ``dataset`` (that same name) unless the row has one.

A damaged dataset is refused before the run, in one line that names the
file: a JSON file that does not parse or lacks what it must hold, an Arrow
file that is missing, unreadable or cut short (without the end-of-stream
marker a closed Arrow stream ends with), or a prepared split whose files
hold other row counts than its ``dataset_info.json`` says. Damage that only
reading the rows finds is a dead letter after the rows before it, as
:class:`~beamtrove.transforms.readers.ReadIpc` makes it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from beamtrove.configuration import ConfigurationError
from beamtrove.formats.hf import PREPARED_INFO, SAVED_SPLITS, SAVED_STATE
from beamtrove.fs import InputFile, filesystem, join, read_json
from beamtrove.transforms.readers.base import FileReader
from beamtrove.transforms.readers.ipc import IpcParser
from beamtrove.transforms.readers.rows import RowFields

__all__ = ["ReadHuggingFace"]

#: DataTrove numbers rows per task; a one-task run is task 00000.
_TASK = "00000"
#: How a closed Arrow IPC stream ends; a stream cut after a record batch would otherwise read as a whole one.
_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"
_SAVE_AGAIN = "restore it, or write the dataset again with save_to_disk"
_PREPARE_AGAIN = "restore it, or prepare the dataset again (load_dataset with download_mode='force_redownload')"


@dataclasses.dataclass(frozen=True)
class _Split:
    """The Arrow files of a split, and what its JSON files promise about them.

    Attributes:
        urls: The files, in row order.
        listed_in: The JSON file that lists the split (named when a file is missing).
        fix: What to do about a damaged file of the dataset.
        shard_rows: The rows of each file, when ``listed_in`` says.
        rows: The rows of the split, when ``listed_in`` says.
    """

    urls: list[str]
    listed_in: str
    fix: str
    shard_rows: list[int] | None = None
    rows: int | None = None


class ReadHuggingFace(FileReader):
    """Reads one split of a Hugging Face dataset stored on this machine as documents.

    Reads what DataTrove's ``HuggingFaceDatasetReader`` reads from local data
    (``load_from_disk=True``, or a hub name ``load_dataset`` finds in its
    cache offline), without downloading anything or importing ``datasets``.
    Rows become documents as in :class:`~beamtrove.transforms.readers.ReadIpc`,
    except that ids and metadata follow DataTrove's convention for datasets
    (see :mod:`beamtrove.transforms.readers.hf`), with no ``file_path``.

    Stats: as :class:`~beamtrove.transforms.readers.ReadIpc`.
    """

    def __init__(
        self,
        dataset: str | Iterable[str],
        *,
        split: str | None = None,
        config: str | None = None,
        cache_dir: str | None = None,
        text_key: str = "text",
        id_key: str = "id",
        default_metadata: Mapping[str, Any] | None = None,
        batch_size: int = 1024,
        storage_options: Mapping[str, Any] | None = None,
        **options: Any,
    ):
        """Finds the split's files and counts their rows.

        Args:
            dataset: A folder written by ``save_to_disk``, a folder ``load_dataset``
                prepared in its cache, or a hub name (``owner/name``) looked up
                in that cache; a one-item list of one of these.
            split: The split to read; may be left out when there is only one.
            config: The configuration of a hub name to read; may be left out
                when the cache holds only one.
            cache_dir: Where ``load_dataset`` caches datasets. Default:
                ``$HF_DATASETS_CACHE``, else ``$HF_HOME/datasets``, else
                ``~/.cache/huggingface/datasets``.
            text_key: Column holding the text.
            id_key: Column holding the id; rows without one get
                ``<dataset>/00000/<0-based row index in the split>``.
            default_metadata: Metadata every document starts from.
            batch_size: Rows turned into documents at a time.
            storage_options: fsspec filesystem options.
            **options: ``skip``, ``limit`` and ``progress_interval``, as
                :class:`FileReader` takes them.

        Raises:
            FileNotFoundError: The dataset is neither a folder nor in the cache.
            ValueError: Not one dataset was given, the folder holds no dataset,
                or the split or configuration is missing or unknown.
            ConfigurationError: A file of the dataset is missing or damaged;
                the message names it.
        """
        datasets = [dataset] if isinstance(dataset, str) else list(dataset)
        if len(datasets) != 1 or not isinstance(datasets[0], str):
            raise ValueError(f"The Hugging Face reader reads one dataset at a time; got {datasets}.")
        name, chosen = _split_files(datasets[0].rstrip("/"), split, config, cache_dir, storage_options)
        files = _input_files(chosen, f"{name}/{_TASK}", storage_options)
        fields = RowFields(text_key, id_key, {"dataset": name, **(default_metadata or {})}, add_file_path=False)
        super().__init__(files, IpcParser(fields, batch_size), storage_options=storage_options, **options)


def _input_files(split: _Split, name: str, storage_options: Mapping[str, Any] | None) -> list[InputFile]:
    """The split's files, rows numbered across them, once each is found whole and as its JSON files say."""
    files, first_index = [], 0
    for number, url in enumerate(split.urls):
        rows = _row_count(url, split, storage_options)
        if split.shard_rows is not None and rows != split.shard_rows[number]:
            raise ConfigurationError(
                f"{url} holds {rows} rows where {split.listed_in} says {split.shard_rows[number]}: {split.fix}."
            )
        fs, path = filesystem(url, storage_options)
        files.append(InputFile(url, name, fs.size(path), first_index=first_index))
        first_index += rows
    if split.rows is not None and first_index != split.rows:
        raise ConfigurationError(
            f"The Arrow files of the split hold {first_index} rows where {split.listed_in} says {split.rows} "
            f"(a file is missing or was replaced?): {split.fix}."
        )
    return files


def _split_files(
    dataset: str,
    split: str | None,
    config: str | None,
    cache_dir: str | None,
    storage_options: Mapping[str, Any] | None,
) -> tuple[str, _Split]:
    """The name the dataset's ids start with, and the split to read."""
    fs, path = filesystem(dataset, storage_options)
    if not fs.isdir(path):
        return dataset, _prepared_split_files(_cached_dataset(dataset, config, cache_dir), split, dataset)
    if config is not None:
        raise ValueError(f"{dataset} is a folder holding one configuration: leave out the configuration.")
    if fs.exists(join(path, SAVED_SPLITS)):
        listing = join(dataset, SAVED_SPLITS)
        splits = _read_json(listing, _SAVE_AGAIN, storage_options).get("splits")
        if not (isinstance(splits, list) and splits and all(isinstance(name, str) for name in splits)):
            raise _damaged(listing, "it lists no splits", _SAVE_AGAIN)
        chosen = _choose_split(splits, split, dataset)
        return join(dataset, chosen), _saved_split_files(join(dataset, chosen), None, storage_options)
    if fs.exists(join(path, SAVED_STATE)):
        return dataset, _saved_split_files(dataset, split, storage_options)
    if fs.exists(join(path, PREPARED_INFO)):
        return dataset, _prepared_split_files(dataset, split, dataset, storage_options)
    raise ValueError(
        f"{dataset} holds no Hugging Face dataset: expected {SAVED_SPLITS} or {SAVED_STATE} "
        f"(written by save_to_disk) or {PREPARED_INFO} (prepared by load_dataset)."
    )


def _choose_split(splits: Iterable[str], split: str | None, dataset: str) -> str:
    splits = list(splits)
    if split is None and len(splits) == 1:
        return splits[0]
    if split not in splits:
        asked = "No split was chosen" if split is None else f"There is no split {split!r}"
        raise ValueError(f"{asked} in {dataset}: choose one of {', '.join(splits)}.")
    return split


def _saved_split_files(folder: str, split: str | None, storage_options: Mapping[str, Any] | None) -> _Split:
    """The Arrow files of a folder ``Dataset.save_to_disk`` wrote, in order."""
    listing = join(folder, SAVED_STATE)
    state = _read_json(listing, _SAVE_AGAIN, storage_options)
    entries = state.get("_data_files")
    if not (isinstance(entries, list) and entries and all(isinstance(e, dict) for e in entries)):
        raise _damaged(listing, "it lists no Arrow files under _data_files", _SAVE_AGAIN)
    if not all(isinstance(entry.get("filename"), str) for entry in entries):
        raise _damaged(listing, "an entry of _data_files has no filename", _SAVE_AGAIN)
    if split is not None and split != state.get("_split"):
        raise ValueError(
            f"{folder} holds one dataset (split {state.get('_split')!r}), not a split {split!r}: leave out the split."
        )
    return _Split([join(folder, entry["filename"]) for entry in entries], listing, _SAVE_AGAIN)


def _prepared_split_files(
    folder: str, split: str | None, dataset: str, storage_options: Mapping[str, Any] | None = None
) -> _Split:
    """The Arrow files of a split of a dataset ``load_dataset`` prepared in ``folder``, in order."""
    listing = join(folder, PREPARED_INFO)
    splits = _read_json(listing, _PREPARE_AGAIN, storage_options).get("splits")
    if not splits:
        raise ConfigurationError(
            f"{folder} holds neither {SAVED_STATE} nor a {PREPARED_INFO} that lists splits: if save_to_disk wrote "
            f"it, its {SAVED_STATE} is missing; {_SAVE_AGAIN}."
        )
    if not (isinstance(splits, dict) and all(isinstance(about, dict) for about in splits.values())):
        raise _damaged(listing, "its splits are not a mapping of split names to their sizes", _PREPARE_AGAIN)
    chosen = _choose_split(splits, split, dataset)
    fs, path = filesystem(folder, storage_options)
    shard = re.compile(rf"-{re.escape(chosen)}(-\d+-of-(\d+))?\.arrow$")
    names = sorted(name for name in (posixpath.basename(p) for p in fs.ls(path, detail=False)) if shard.search(name))
    if not names:
        raise ConfigurationError(
            f"{folder} lists the split {chosen!r} but holds none of its Arrow files: {_PREPARE_AGAIN}."
        )
    numbered = shard.search(names[0])
    if numbered.group(2):
        stem = names[0][: numbered.start(1)]
        count = int(numbered.group(2))
        for number in range(count):
            expected = f"{stem}-{number:05d}-of-{count:05d}.arrow"
            if expected not in names:
                raise ConfigurationError(f"{join(folder, expected)} is missing: {_PREPARE_AGAIN}.")
    about = splits[chosen]
    shard_rows = about.get("shard_lengths")
    if shard_rows is not None and len(shard_rows) != len(names):
        raise _damaged(
            listing, f"it lists {len(shard_rows)} files of split {chosen!r}; {len(names)} are there", _PREPARE_AGAIN
        )
    return _Split(
        [join(folder, name) for name in names], listing, _PREPARE_AGAIN, shard_rows, about.get("num_examples")
    )


def _cached_dataset(name: str, config: str | None, cache_dir: str | None) -> str:
    """The newest folder where ``load_dataset`` prepared the hub dataset ``name``, as it finds one offline.

    Raises:
        FileNotFoundError: The cache holds no copy of the dataset.
        ValueError: It holds several configurations and none was chosen.
    """
    root = cache_dir or _default_cache("HF_DATASETS_CACHE", "datasets")
    *owner, dataset_name = name.split("/")
    top = os.path.join(root, "___".join([*owner, _snake_case(dataset_name)]))
    prepared = [
        folder
        for folder in _subfolders(top, depth=3)
        if (config is None or _parts(folder)[-3] == config)
        and _info_config(folder) == _parts(folder)[-3]  # folders named after data files, not configurations
    ]
    if not prepared:
        damaged = [
            join(folder, PREPARED_INFO)
            for folder in _subfolders(top, depth=3)
            if (config is None or _parts(folder)[-3] == config)
            and os.path.isfile(join(folder, PREPARED_INFO))
            and _info_config(folder) is None
        ]
        if damaged:
            raise _damaged(damaged[0], "not JSON naming its configuration", _PREPARE_AGAIN)
        raise FileNotFoundError(_not_cached_message(name, config, top))
    configs = sorted({_parts(folder)[-3] for folder in prepared})
    if len(configs) > 1:
        raise ValueError(f"The cache holds several configurations of {name} ({', '.join(configs)}): choose one.")
    return max(prepared, key=os.path.getmtime)


def _not_cached_message(name: str, config: str | None, top: str) -> str:
    which = name if config is None else f"configuration {config!r} of {name}"
    message = f"{which} is neither a folder nor prepared in the datasets cache ({top})."
    owner, _, dataset_name = name.rpartition("/")
    hub_copy = os.path.join(_default_cache("HF_HUB_CACHE", "hub"), f"datasets--{owner}--{dataset_name}")
    if owner and os.path.isdir(hub_copy):
        message += (
            f" Its files are in the hub cache ({hub_copy}/snapshots/...), which load_dataset does not read offline "
            "either: read them with --input_format parquet (or jsonl, csv)."
        )
    return message


def _default_cache(variable: str, folder: str) -> str:
    if os.environ.get(variable):
        return os.environ[variable]
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(home, folder)


def _subfolders(folder: str, depth: int) -> list[str]:
    if depth == 0:
        return [folder]
    if not os.path.isdir(folder):
        return []
    return [found for entry in os.scandir(folder) if entry.is_dir() for found in _subfolders(entry.path, depth - 1)]


def _parts(folder: str) -> list[str]:
    return folder.split(os.sep)


def _info_config(folder: str) -> str | None:
    """The configuration a prepared folder holds; None when its dataset_info.json is missing or damaged."""
    try:
        with open(os.path.join(folder, PREPARED_INFO), encoding="utf-8") as info:
            return json.load(info).get("config_name")
    except (OSError, ValueError, AttributeError):  # a folder load_dataset left unfinished, or damaged
        return None


def _snake_case(name: str) -> str:
    """A dataset name as ``datasets`` names its cache folder: ``SQuAD_v2`` becomes ``s_qu_ad_v2``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", name).lower()


def _damaged(url: str, problem: str, fix: str) -> ConfigurationError:
    return ConfigurationError(f"{url} is damaged ({problem}): {fix}.")


def _read_json(url: str, fix: str, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON object in ``url``.

    Raises:
        ConfigurationError: The file is missing or not a JSON object.
    """
    try:
        return read_json(url, storage_options)
    except FileNotFoundError:
        raise ConfigurationError(f"{url} is missing: {fix}.") from None
    except ValueError as exc:
        raise ConfigurationError(f"{exc}: {fix}.") from None


def _row_count(url: str, split: _Split, storage_options: Mapping[str, Any] | None) -> int:
    """The rows of an Arrow IPC stream file, from its batches' headers (local files are memory-mapped).

    Raises:
        ConfigurationError: The file is missing, unreadable or cut short.
    """
    fs, path = filesystem(url, storage_options)
    try:
        source = pa.memory_map(path) if "file" in fs.protocol else fs.open(path, "rb")
        with source:
            with pa.ipc.open_stream(source) as reader:
                rows = sum(batch.num_rows for batch in reader)
            source.seek(-len(_END_OF_STREAM), os.SEEK_END)
            if source.read(len(_END_OF_STREAM)) != _END_OF_STREAM:
                raise _damaged(url, "it ends after a record batch, without the end of an Arrow stream", split.fix)
    except FileNotFoundError:
        raise ConfigurationError(f"{url} is missing, though {split.listed_in} lists it: {split.fix}.") from None
    except (pa.ArrowInvalid, OSError) as exc:  # pyarrow raises OSError for unreadable messages
        raise _damaged(url, f"not a whole Arrow stream: {exc}", split.fix) from None
    return rows
