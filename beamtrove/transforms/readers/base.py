"""The ``PTransform`` shared by all file readers.

A reader is a :class:`~beamtrove.formats.records.RecordParser` (how to turn
one file into documents) run by :class:`FileReader`. The reader matches its
input patterns when it is built, so that a wrong path fails before any work,
and again when the run starts (:class:`_MatchFiles`), so that the pipeline
graph holds the patterns and not the list of files; the files are then
spread over the workers and each is streamed by :class:`_ReadFiles`, which
reads as :class:`~beamtrove.formats.records.RecordReader` does and keeps its
books in Beam Metrics: every record a parser reports is counted as read and
as emitted, skipped with a reason, or errored with a reason (a
:class:`~beamtrove.dead_letter.DeadLetter`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.formats.records import Outcome, RecordParser, RecordReader, match_files
from beamtrove.fs import FileListing, InputFile, match_inputs
from beamtrove.layout import DEAD_LETTERS
from beamtrove.metrics import StepMetrics
from beamtrove.network import RetryPolicy

__all__ = ["FileReader"]

_LOGGER = logging.getLogger(__name__)

# Dead letters are all counted and output; logging stops after this many per DoFn instance.
_DEAD_LETTERS_LOGGED = 100


class _MatchFiles(beam.DoFn):
    """Matches the reader's inputs when the run starts, as the reader matched them when it was built.

    Yields the files one group per unit of work: one file each, or all of
    them in order for a reader that counts documents across files (``skip``,
    ``limit``). A pattern that matches nothing any more is a dead letter; the
    output folder of a run that kept no document is no file, as it was when
    the reader was built.
    """

    def __init__(self, suffixes: tuple[str, ...], step: str, storage_options: Mapping[str, Any], in_order: bool):
        self._suffixes = suffixes
        self._step = step
        self._storage_options = storage_options
        self._in_order = in_order

    def process(self, inputs: tuple[str | InputFile, ...]) -> Iterator[tuple[InputFile, ...] | DeadLetter]:
        metrics = StepMetrics(self._step)
        matched: list[InputFile] = []
        for pattern in inputs:
            # Only a pattern gone since the reader was built is bad input; a failing file system (a network error,
            # refused credentials) raises, so that the runner retries the work.
            try:
                matched += match_inputs(pattern, self._suffixes, self._storage_options, warn_empty_runs=False)
            except FileNotFoundError as missing:
                metrics.received()
                metrics.errored("no_match")
                yield DeadLetter(self._step, "no_match", str(missing), file=str(pattern))
        # Sorted and de-duplicated across the patterns, as the reader's files.
        files = tuple(match_inputs(matched)) if matched else ()
        _LOGGER.info("%s: %d input files match when the run starts.", self._step, len(files))
        if self._in_order:
            yield files
        else:
            yield from ((file,) for file in files)


class _ReadFiles(beam.DoFn):
    """Reads the records of a group of files, in order, counting each into the step's Beam Metrics.

    ``skip`` and ``limit`` count documents across the group. Dead letters of
    the matching step are passed on as they are, counted there.
    """

    def __init__(self, reader: RecordReader, step: str):
        self._reader = reader
        self._step = step

    def process(self, files: tuple[InputFile, ...] | DeadLetter) -> Iterator[Outcome]:
        if isinstance(files, DeadLetter):
            yield files
            return
        yield from self._reader.read(files, self._step, StepMetrics(self._step))


class _SplitDeadLetters(beam.DoFn):
    """Sends records to the main output and dead letters to their own."""

    def __init__(self):
        self._logged = 0

    def process(self, outcome):
        if not isinstance(outcome, DeadLetter):
            yield outcome
            return
        if self._logged < _DEAD_LETTERS_LOGGED:
            self._logged += 1
            _LOGGER.warning(
                "%s: %s in %s (offset %s, line %s): %s",
                outcome.step,
                outcome.reason,
                outcome.file,
                outcome.offset,
                outcome.line,
                outcome.message,
            )
        yield beam.pvalue.TaggedOutput(DEAD_LETTERS, outcome)


class FileReader(beam.PTransform):
    """Base of the file readers: matches inputs at construction, and again when the run starts; reads them.

    The result is a ``PCollection`` of ``element_type``, by default
    :class:`~beamtrove.document.Document`.
    Records that could not be read are counted (``errors.<reason>``), logged
    and, after :meth:`with_dead_letters`, returned in a second
    ``PCollection`` of :class:`~beamtrove.dead_letter.DeadLetter`.
    """

    #: What the parser's records are.
    element_type: type = Document

    def __init__(
        self,
        paths: str | InputFile | FileListing | Iterable[str | InputFile | FileListing],
        parser: RecordParser,
        *,
        skip: int = 0,
        limit: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        progress_interval: float | None = 10.0,
        retries: RetryPolicy | None = None,
    ):
        """Matches the input files now, so a wrong path fails before any work.

        The pipeline graph holds ``paths``, not the files they match, so its
        size does not grow with the number of files.

        Args:
            paths: Files, directories or glob patterns (paths or fsspec URLs),
                lists of files (:class:`~beamtrove.fs.FileListing`, such as
                :class:`~beamtrove.commoncrawl.DumpFiles`), or matched
                :class:`~beamtrove.fs.InputFile` entries.
            parser: Turns one file into records.
            skip: Documents to skip at the start of the input (in sorted file
                order), counted as ``skipped.skip_option``.
            limit: Stop after this many documents; with ``skip``, this reads
                the files one after the other.
            storage_options: fsspec filesystem options (credentials, ...).
            progress_interval: Seconds between progress log lines of each
                worker; 0 turns them off. None: what this reader reads is no
                input of the run (a run folder read back for its report), so
                it counts in no progress.
            retries: How transient faults of a network or a store are waited
                out while reading; the default policy when None.

        Raises:
            FileNotFoundError: A path does not exist or a pattern matches no file.
            ValueError: ``skip`` or ``limit`` is negative, or a byte range is
                given for a parser or a file that cannot be read in part.
        """
        super().__init__()
        self._reader = RecordReader(
            parser,
            skip=skip,
            limit=limit,
            storage_options=storage_options,
            progress_interval=progress_interval,
            retries=retries,
        )
        #: What was asked for: the paths and patterns, as given.
        self.patterns = (paths,) if isinstance(paths, (str, InputFile, FileListing)) else tuple(paths)
        #: The files matched now. A run matches the patterns again when it starts and reads what matches then.
        self.files = match_files(self.patterns, parser, storage_options)
        self._dead_letters = False

    def with_dead_letters(self) -> FileReader:
        """Makes the reader return ``(documents, dead_letters)``."""
        self._dead_letters = True
        return self

    @property
    def units_of_work(self) -> int:
        """How many units the reading is spread over the workers in: one per file, or one for all of them when they
        are read one after the other (``skip``, ``limit``)."""
        return 1 if self._in_order else len(self.files)

    @property
    def _in_order(self) -> bool:
        return self._reader.skip > 0 or self._reader.limit is not None

    def read_file(self, file: InputFile) -> Iterator[Any]:
        """The records and dead letters of one of :attr:`files`, counted as the transform counts them."""
        return self._reader.read_file(file, self.label, StepMetrics(self.label))

    def expand(self, pbegin):
        # The graph holds the patterns, not the files they match: its size does not grow with the input. (Matched
        # InputFile entries, as --input_ranges and Hugging Face datasets give them, are a list by nature.)
        reader = self._reader
        match = _MatchFiles(reader.parser.suffixes, self.label, reader.storage_options, in_order=self._in_order)
        outputs = (
            pbegin
            | "Inputs" >> beam.Create([self.patterns])
            | "MatchFiles" >> beam.ParDo(match)
            # Spreads the files over all workers: one file is one unit of work.
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles" >> beam.ParDo(_ReadFiles(reader, self.label))
            | "SplitDeadLetters" >> beam.ParDo(_SplitDeadLetters()).with_outputs(DEAD_LETTERS, main="documents")
        )
        outputs.documents.element_type = self.element_type
        return (outputs.documents, outputs[DEAD_LETTERS]) if self._dead_letters else outputs.documents
