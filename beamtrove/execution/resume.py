"""Resumable runs: rerunning into the same output skips the inputs already completed.

With ``--resumable``, a pipeline writes each input file's outputs under names
derived from the input and a completion marker after them (see
:mod:`beamtrove.transforms.per_input`, :mod:`beamtrove.completion` and :mod:`beamtrove.layout`). Before the
next run into that output, :func:`pending_inputs` checks that the
configuration is the one the output was started with (``_resume.json``) and
returns the inputs to process: those without a marker, and those whose
marker or outputs were damaged since (a marker that cannot be read or was
edited, an output missing, of another size or with other contents), each
named in a warning. :func:`completed_totals` sums the markers for the stats
of the whole output.
"""

from __future__ import annotations

import logging
import posixpath
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove import __version__
from beamtrove.completion import parse_marker, record_sha256
from beamtrove.execution.output import output_entries
from beamtrove.fs import (
    InputFile,
    file_damage,
    filesystem,
    is_temporary,
    join,
    path_sha256,
    read_json,
    write_json,
)
from beamtrove.layout import COMPLETED_DIR, RESUME_CONFIG_FILE, input_stem
from beamtrove.option_parsing import option_actions
from beamtrove.options import paths_read

__all__ = ["changed_reads", "completed_totals", "configuration", "pending_inputs", "read_digests"]

_LOGGER = logging.getLogger(__name__)


def configuration(pipeline: str, options: PipelineOptions, option_classes: Iterable[type[PipelineOptions]]) -> dict:
    """What identifies a run's results: the pipeline, beamtrove's version and the values of ``option_classes``."""
    values = options.get_all_options(drop_default=False)
    chosen = {action.dest: values.get(action.dest) for action in option_actions(option_classes)}
    return {"pipeline": pipeline, "beamtrove_version": __version__, "options": dict(sorted(chosen.items()))}


def read_digests(options: PipelineOptions, option_classes: Iterable[type[PipelineOptions]]) -> list[dict[str, Any]]:
    """What every file or folder the options name for a run to read holds, by content.

    A run is identified by what it reads, not by the names it reads it
    under: a tokenizer, a model or an index replaced at the same path makes
    another run. Each entry is ``{"option", "path", "sha256"}`` (see
    :func:`~beamtrove.fs.path_sha256`; None when nothing is at the path).
    """
    read = paths_read(options, option_classes)
    return [{"option": flag, "path": path, "sha256": path_sha256(path)} for flag, path in read]


def changed_reads(recorded: Iterable[Mapping[str, Any]]) -> list[str]:
    """The files of :func:`read_digests` entries that hold something else now, each as ``--option path``.

    A path that holds nothing now is left to the run that reads it, which
    says what is missing on this machine.
    """
    return [
        f"{entry['option']} {entry['path']}"
        for entry in recorded
        if (now := path_sha256(entry["path"])) is not None and now != entry["sha256"]
    ]


def _read_json(url: str, storage_options) -> dict | None:
    """The JSON object in ``url``, None when it does not exist.

    Raises:
        ValueError: The file holds no JSON object; the message names it and what to do.
    """
    try:
        return read_json(url, storage_options)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ValueError(f"{exc}: restore it, or pass --restart to start over.") from None


def _remove_unfinished(fs, folder: str, unfinished: Callable[[str], bool]) -> None:
    """Removes the files of ``folder`` whose names ``unfinished`` tells: what a killed run was writing."""
    for path in fs.ls(folder, detail=False) if fs.exists(folder) else ():
        if unfinished(posixpath.basename(path.rstrip("/"))):
            fs.rm(path)


def _completion_markers(fs, folder: str, stems: set[str]) -> dict[str, tuple[str, bytes]]:
    """The markers in ``folder`` of the inputs named ``stems``: stem -> (path, bytes); one listing, one batched read."""
    if not fs.exists(folder):
        return {}
    paths = [
        path
        for path in fs.ls(folder, detail=False)
        if path.endswith(".json") and posixpath.basename(path).removesuffix(".json") in stems
    ]
    # A list makes fsspec fetch the files concurrently on object stores: a dump has tens of thousands.
    contents = fs.cat(paths) if paths else {}
    return {posixpath.basename(path).removesuffix(".json"): (path, data) for path, data in contents.items()}


def _verified(
    fs, output: str, marker_path: str, data: bytes, config_sha256: str, storage_options
) -> tuple[dict | None, str]:
    """The marker when it and every output it names are as completed; else None and the first problem."""
    marker, problem = parse_marker(data)
    if marker is None:
        return None, f"its completion marker {marker_path} {problem}"
    if marker.get("config_sha256") != config_sha256:
        return None, f"its completion marker {marker_path} was made with another configuration"
    for relative, expected in sorted(marker["outputs"].items()):
        damage = file_damage(join(output, relative), expected.get("bytes"), expected.get("sha256"), storage_options)
        if damage:
            return None, f"{damage} (its input's completion marker)"
    return marker, ""


def _discard(fs, output: str, marker_path: str, data: bytes, storage_options) -> None:
    """Removes a damaged input's marker, then whatever outputs it names, so the input starts clean."""
    marker, _ = parse_marker(data)
    fs.rm(marker_path)
    for relative in (marker or {}).get("outputs", {}):
        path = filesystem(join(output, relative), storage_options)[1]
        if fs.exists(path):
            fs.rm(path)


def _start_over(fs, root: str, output: str, storage_options) -> None:
    for name in output_entries(output, storage_options):
        fs.rm(join(root, name), recursive=True)
    _LOGGER.warning("--restart: deleted what %s held", output)


def pending_inputs(
    inputs: Sequence[InputFile],
    output: str,
    config: Mapping[str, Any],
    *,
    restart: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[list[InputFile], str]:
    """The inputs still to process into ``output``, and the configuration's SHA-256.

    Records ``config`` in ``<output>/_resume.json`` on the first run. An input
    is pending when it has no completion marker, or when its marker or one
    of its outputs was damaged since: the damage is logged, naming the file,
    and the marker and outputs are removed before the input runs again. Runs
    into one output must not overlap.

    Raises:
        ValueError: The output was started with another configuration, or by
            a run that was not resumable (unless ``restart``); ``_resume.json``
            is unreadable; or an input differs in size from when it was
            completed.
    """
    fs, root = filesystem(output, storage_options)
    config_sha256 = record_sha256(config)
    config_url = join(output, RESUME_CONFIG_FILE)
    previous = None if restart else _read_json(config_url, storage_options)
    same_config = previous is not None and record_sha256(previous) == config_sha256
    if previous is not None and not same_config:
        raise ValueError(
            f"{output} was started with another configuration (differing: {', '.join(_differing(previous, config))}); "
            "rerun with the same options, write to another --output, or pass --restart to delete its "
            "completed outputs and start over."
        )
    if restart:
        _start_over(fs, root, output, storage_options)
    if not same_config:
        write_json(config, config_url, storage_options)
    # Markers are moved into place whole; stats.json is written under a temporary name, then moved.
    _remove_unfinished(fs, join(root, COMPLETED_DIR), lambda name: not name.endswith(".json"))
    _remove_unfinished(fs, root, is_temporary)
    stems = {file.url: input_stem(file) for file in inputs}
    markers = _completion_markers(fs, join(root, COMPLETED_DIR), set(stems.values()))
    pending = []
    for file in inputs:
        if stems[file.url] not in markers:
            pending.append(file)
            continue
        marker_path, data = markers[stems[file.url]]
        marker, problem = _verified(fs, output, marker_path, data, config_sha256, storage_options)
        if marker is None:
            _LOGGER.warning("%s runs again: %s", file.url, problem)
            _discard(fs, output, marker_path, data, storage_options)
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


def _differing(previous: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    options, earlier = config.get("options", {}), previous.get("options", {})
    changed = sorted(key for key in {*earlier, *options} if earlier.get(key) != options.get(key))
    reads, read_before = config.get("reads", []), previous.get("reads", [])
    changed += [
        f"what {entry['option']} {entry['path']} holds"
        for entry in reads
        if entry not in read_before and entry["option"].lstrip("-") not in changed
    ]
    if previous.get("beamtrove_version") != config.get("beamtrove_version"):
        changed.append("beamtrove_version")
    return changed or ["pipeline"]


def completed_totals(output: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What every completed input of a resumable output adds up to, from the markers.

    Returns:
        ``{"inputs": completed inputs, "steps": {step: {"counters": {...}}}}``,
        the steps in the order they first appear.
    """
    fs, root = filesystem(output, storage_options)
    folder = join(root, COMPLETED_DIR)
    paths = [path for path in fs.ls(folder, detail=False) if path.endswith(".json")] if fs.exists(folder) else []
    steps: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    inputs = 0
    for _, data in sorted((fs.cat(paths) if paths else {}).items()):
        marker, _ = parse_marker(data)
        if marker is None:
            continue
        inputs += 1
        for step, counters in marker.get("counters", {}).items():
            for name, value in counters.items():
                steps[step][name] += value
    return {"inputs": inputs, "steps": {step: {"counters": dict(counters)} for step, counters in steps.items()}}
