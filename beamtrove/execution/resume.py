"""Resumable runs: rerunning into the same output skips the inputs already completed.

With ``--resumable``, a pipeline writes each input file's outputs under names
derived from the input and a completion marker after them (see
:mod:`beamtrove.transforms.per_input` and :mod:`beamtrove.layout`). Before the
next run into that output, :func:`pending_inputs` checks that the
configuration is the one the output was started with (``_resume.json``),
drops the temporary files of killed runs and returns the inputs that have no
marker yet.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove import __version__
from beamtrove.fs import InputFile, filesystem, join, open_url, write_json
from beamtrove.layout import (
    COMPLETED_DIR,
    DEAD_LETTERS_DIR,
    DOCUMENTS_DIR,
    EXCLUDED_DIR,
    RESUME_CONFIG_FILE,
    RESUME_TEMP_DIR,
    input_stem,
)
from beamtrove.options import option_actions

__all__ = ["configuration", "pending_inputs"]

_LOGGER = logging.getLogger(__name__)


def configuration(pipeline: str, options: PipelineOptions, option_classes: Iterable[type[PipelineOptions]]) -> dict:
    """What identifies a run's results: the pipeline, beamtrove's version and the values of ``option_classes``."""
    values = options.get_all_options(drop_default=False)
    chosen = {action.dest: values.get(action.dest) for action in option_actions(option_classes)}
    return {"pipeline": pipeline, "beamtrove_version": __version__, "options": dict(sorted(chosen.items()))}


def _sha256(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _read_json(url: str, storage_options) -> dict | None:
    fs, path = filesystem(url, storage_options)
    if not fs.exists(path):
        return None
    with open_url(url, "rb", storage_options) as source:
        return json.loads(source.read())


def _completion_markers(fs, folder: str, stems: set[str]) -> dict[str, dict]:
    """The markers in ``folder`` of the inputs named ``stems``, by stem: one listing, one batched read."""
    if not fs.exists(folder):
        return {}
    paths = [
        path
        for path in fs.ls(folder, detail=False)
        if path.endswith(".json") and posixpath.basename(path).removesuffix(".json") in stems
    ]
    # A list makes fsspec fetch the files concurrently on object stores: a dump has tens of thousands.
    contents = fs.cat(paths) if paths else {}
    return {posixpath.basename(path).removesuffix(".json"): json.loads(data) for path, data in contents.items()}


def pending_inputs(
    inputs: Sequence[InputFile],
    output: str,
    config: Mapping[str, Any],
    *,
    restart: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[list[InputFile], str]:
    """The inputs still to process into ``output``, and the configuration's SHA-256.

    Records ``config`` in ``<output>/_resume.json`` on the first run and
    removes the temporary files that killed runs left. Runs into one output
    must not overlap.

    Raises:
        ValueError: The output was started with another configuration (unless
            ``restart``), or an input differs in size from when it was completed.
    """
    fs, root = filesystem(output, storage_options)
    config_sha256 = _sha256(config)
    config_url = join(output, RESUME_CONFIG_FILE)
    previous = _read_json(config_url, storage_options)
    same_config = previous is not None and _sha256(previous) == config_sha256
    if previous is not None and not same_config:
        if not restart:
            changed = sorted(
                key
                for key in {*previous["options"], *config["options"]}
                if previous["options"].get(key) != config["options"].get(key)
            )
            if previous.get("beamtrove_version") != config["beamtrove_version"]:
                changed.append("beamtrove_version")
            raise ValueError(
                f"{output} was started with another configuration (differing: {', '.join(changed) or 'pipeline'}); "
                "rerun with the same options, write to another --output, or pass --restart to delete its "
                "completed outputs and start over."
            )
        for folder in (COMPLETED_DIR, DOCUMENTS_DIR, EXCLUDED_DIR, DEAD_LETTERS_DIR):
            if fs.exists(join(root, folder)):
                fs.rm(join(root, folder), recursive=True)
        _LOGGER.warning("--restart: deleted the completed outputs of %s made with another configuration", output)
    if fs.exists(join(root, RESUME_TEMP_DIR)):
        fs.rm(join(root, RESUME_TEMP_DIR), recursive=True)
    if not same_config:
        write_json(config, config_url, storage_options)
    stems = {file.url: input_stem(file) for file in inputs}
    markers = _completion_markers(fs, join(root, COMPLETED_DIR), set(stems.values()))
    pending = []
    for file in inputs:
        marker = markers.get(stems[file.url])
        if marker is None:
            pending.append(file)
        elif marker["size"] != file.size or marker["name"] != file.name:
            raise ValueError(
                f"{file.url} ({file.size} bytes) is not the input completed as {marker['name']} ({marker['size']} "
                "bytes); restore it, or pass --restart to process everything again."
            )
    _LOGGER.info(
        "resuming %s: %d of %d inputs were completed before and are skipped",
        output,
        len(inputs) - len(pending),
        len(inputs),
    )
    return pending, config_sha256
