"""Runs a chain of per-document steps over each input file and finalizes that file's outputs at once.

``ProcessInputs`` is for resumable runs: a file's documents, excluded
documents and dead letters are written to temporary files while the file is
processed; when its last record has passed every step, they are moved to
names derived from the input (``documents/<stem>.jsonl.gz``,
``excluded/<step>/<stem>.jsonl.gz``, ``dead_letters/<stem>.jsonl``) and only
then is the completion marker ``_completed/<stem>.json`` written. A run
killed at any point leaves every input either completed, with all its outputs
in place, or without a marker, to be processed again by the next run.

The marker (:mod:`beamtrove.completion`) records each output's records, size
and SHA-256, and the counters of every step over the input, and carries a
checksum of itself, so that the next run can tell a completed input from one
whose outputs or marker were damaged since.

The steps are the very DoFns the ordinary transforms apply (see
``Filter.step_fn`` and ``Extract.step_fn``), run one after the other inside
one DoFn per input file, which is what a runner's fusion does with them
anyway; their counters are the same.
"""

from __future__ import annotations

import collections
import dataclasses
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam import pvalue

from beamtrove.completion import completion_marker_record
from beamtrove.dead_letter import DeadLetter
from beamtrove.document import document_row
from beamtrove.fs import InputFile, file_sha256, filesystem, join, move, write_json
from beamtrove.layout import (
    DEAD_LETTERS,
    EXCLUDED,
    KEPT,
    PROCESS_INPUTS,
    STAGING_DIR,
    WRITE_DEAD_LETTERS,
    WRITE_DOCUMENTS,
    completion_marker,
    input_dead_letters,
    input_documents,
    input_excluded,
    input_stem,
    write_excluded,
)
from beamtrove.metrics import StepMetrics, counters_recorded
from beamtrove.resources import Preloading
from beamtrove.transforms.readers.base import FileReader
from beamtrove.transforms.step_fn import run_step_fn
from beamtrove.transforms.writers.base import TempFile
from beamtrove.transforms.writers.jsonl import JsonlFormat

__all__ = ["ProcessInputs"]

#: Records read before they go through the steps together: batched steps see full batches.
_CHUNK = 256


@dataclasses.dataclass
class _Output:
    """One of an input's output files, written under a temporary name until the input is done."""

    final: str
    file: TempFile
    metrics: StepMetrics

    def write(self, element: Any) -> None:
        self.metrics.received()
        self.file.writer.write(element)

    def close(self, storage_options: Mapping[str, Any]) -> dict[str, Any]:
        """Closes the file; returns what the marker records of it: records, bytes and SHA-256."""
        _, size = self.file.close()
        self.metrics.emitted(self.file.writer.records)
        self.metrics.inc("files")
        self.metrics.inc("bytes", size)
        return {
            "records": self.file.writer.records,
            "bytes": size,
            "sha256": file_sha256(self.file.path, storage_options),
        }


class _ProcessInputFn(beam.DoFn):
    def __init__(self, spec: _Spec):
        self._spec = spec

    def setup(self):
        self._steps = list(self._spec.steps)
        for _, fn in self._steps:
            fn.setup()
        self._inputs = StepMetrics(PROCESS_INPUTS)

    def preload(self) -> None:
        for _, fn in self._spec.steps:
            if isinstance(fn, Preloading):
                fn.preload()

    def teardown(self):
        for _, fn in getattr(self, "_steps", ()):
            fn.teardown()

    def process(self, file: InputFile) -> Iterator[dict[str, Any]]:
        spec = self._spec
        stem = spec.stems[file.url]
        temp_dir = join(spec.output, STAGING_DIR, uuid.uuid4().hex)
        outputs: dict[str, _Output] = {}
        counts: dict[str, Any] = {"read": 0, "documents": 0, EXCLUDED: {}, DEAD_LETTERS: {}}
        try:
            with counters_recorded() as counters:
                for chunk in _chunks(spec.reader.read_file(file), _CHUNK):
                    counts["read"] += len(chunk)
                    for kind, step, element in self._run_steps(chunk):
                        self._output(outputs, kind, step, stem, temp_dir).write(element)
                        _count(counts, kind, step)
                written = {output.final: output.close(spec.storage_options) for output in outputs.values()}
            for output in outputs.values():
                move(output.file.path, join(spec.output, output.final), spec.storage_options)
            marker = completion_marker_record(file, spec.config_sha256, written, counts, counters)
            write_json(marker, join(spec.output, completion_marker(stem)), spec.storage_options)
        finally:
            fs, path = filesystem(temp_dir, spec.storage_options)
            if fs.exists(path):
                fs.rm(path, recursive=True)
        self._inputs.inc("completed")
        yield marker

    def _run_steps(self, chunk: list[Any]) -> Iterator[tuple[str, str, Any]]:
        """``(kind, step, element)`` for every output: kind is an output tag (kept, excluded or dead_letters)."""
        documents = []
        for outcome in chunk:
            if isinstance(outcome, DeadLetter):
                yield DEAD_LETTERS, outcome.step, outcome
            else:
                documents.append(outcome)
        for name, fn in self._steps:
            kept = []
            for output in run_step_fn(fn, documents):
                if isinstance(output, pvalue.TaggedOutput):
                    yield (EXCLUDED if output.tag == EXCLUDED else DEAD_LETTERS), name, output.value
                else:
                    kept.append(output)
            documents = kept
        for document in documents:
            yield KEPT, WRITE_DOCUMENTS, document

    def _output(self, outputs: dict[str, _Output], kind: str, step: str, stem: str, temp_dir: str) -> _Output:
        key = f"{kind}/{step}" if kind == EXCLUDED else kind
        if key not in outputs:
            if kind == EXCLUDED:
                final, writer_step, rows = input_excluded(step, stem), write_excluded(step), None
            elif kind == DEAD_LETTERS:
                final, writer_step, rows = input_dead_letters(stem), WRITE_DEAD_LETTERS, DeadLetter.to_row
            else:
                final, writer_step, rows = input_documents(stem), WRITE_DOCUMENTS, None
            metrics = StepMetrics(writer_step)
            suffix = ".jsonl.gz" if final.endswith(".gz") else ".jsonl"
            temp = TempFile.open(
                temp_dir, suffix, JsonlFormat(rows or document_row), metrics, self._spec.storage_options
            )
            outputs[key] = _Output(final, temp, metrics)
        return outputs[key]


def _chunks(elements: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk = []
    for element in elements:
        chunk.append(element)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _count(counts: dict[str, Any], kind: str, step: str) -> None:
    if kind == KEPT:
        counts["documents"] += 1
    else:
        counts[kind][step] = counts[kind].get(step, 0) + 1


@dataclasses.dataclass(frozen=True)
class _Spec:
    reader: FileReader
    steps: tuple[tuple[str, beam.DoFn], ...]
    output: str
    stems: Mapping[str, str]
    config_sha256: str
    storage_options: Mapping[str, Any]


class ProcessInputs(beam.PTransform):
    """Reads each input file, runs the steps over its records and finalizes its outputs.

    The result is a ``PCollection`` of the completion markers written, one
    dict per input file. Counters: each step's own, the writers'
    (``write_documents``, ``write_excluded_<step>``, ``write_dead_letters``) and
    ``process_inputs/completed``.

    Args:
        reader: Matches and reads the inputs; only the files given here are read.
        files: The input files to process (some of ``reader.files``).
        steps: ``(name, DoFn)`` per step, in order: each DoFn emits the kept
            document, or tagged ``excluded`` / ``dead_letters`` outputs.
        output: Output directory (path or fsspec URL).
        config_sha256: Identifies the configuration; recorded in each marker.
        storage_options: fsspec filesystem options.
    """

    def __init__(
        self,
        reader: FileReader,
        files: Sequence[InputFile],
        steps: Sequence[tuple[str, beam.DoFn]],
        output: str,
        config_sha256: str,
        storage_options: Mapping[str, Any] | None = None,
    ):
        super().__init__()
        stems = {file.url: input_stem(file) for file in reader.files}
        clashes = [stem for stem, n in collections.Counter(stems.values()).items() if n > 1]
        if clashes:
            raise ValueError(
                f"Several inputs would write the outputs named {clashes[0]!r}; per-input outputs need inputs "
                "whose paths differ by more than their extension."
            )
        self._files = list(files)
        self._spec = _Spec(reader, tuple(steps), output.rstrip("/"), stems, config_sha256, dict(storage_options or {}))

    def expand(self, pbegin):
        return (
            pbegin
            | "InputFiles" >> beam.Create(self._files)
            # Spreads the files over all workers: one file is one unit of work.
            | "SpreadFiles" >> beam.Reshuffle()
            | "ProcessInput" >> beam.ParDo(_ProcessInputFn(self._spec))
        )
