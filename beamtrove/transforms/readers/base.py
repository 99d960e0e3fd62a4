"""The ``PTransform`` shared by all file readers.

A reader is a :class:`RecordParser` (how to turn one file into documents) run
by :class:`FileReader`. The reader matches its input patterns when it is
built, so that a wrong path fails before any work, and again when the run
starts (:class:`_MatchFiles`), so that the pipeline graph holds the patterns
and not the list of files; the files are then spread over the workers and
each is streamed by :class:`_ReadFiles`. That step, not the parsers, keeps
the books: every record a parser reports is counted as read and as emitted,
skipped with a reason, or errored with a reason (a
:class:`~beamtrove.dead_letter.DeadLetter`).
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

import apache_beam as beam
from fsspec.utils import infer_compression

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.fs import InputFile, match_inputs, open_url
from beamtrove.layout import DEAD_LETTERS
from beamtrove.metrics import StepMetrics
from beamtrove.progress import record_progress
from beamtrove.transforms.readers.compression import CODECS, DamagedStream, Decompressed

__all__ = ["FileReader", "RecordParser", "Skip"]

_LOGGER = logging.getLogger(__name__)

# Dead letters are all counted and output; logging stops after this many per DoFn instance.
_DEAD_LETTERS_LOGGED = 100


@dataclasses.dataclass(frozen=True, slots=True)
class Skip:
    """A record that was read but is not meant to become a document."""

    reason: str


#: What a parser yields per record: a Document (or the record type of a
#: non-document format, such as token shards), a Skip or a DeadLetter.
Outcome = Any


class RecordParser:
    """Turns the bytes of one input file into outcomes, one per record read.

    Subclasses set ``suffixes`` (file endings picked from directory inputs),
    ``compression`` (``"infer"`` to decompress by file name, or None when the
    parser reads the raw bytes itself) and, when they can read part of a
    file, ``reads_byte_ranges``. A parser that decompresses by file name may
    catch :class:`~beamtrove.transforms.readers.compression.DamagedStream`
    to say which record the damage cut; otherwise the damage is a dead letter
    with the file and offset, after every record before it.
    """

    suffixes: tuple[str, ...] = ()
    compression: str | None = None
    #: Whether the parser reads a byte range of a file (see ``InputFile.end``):
    #: records must not straddle range ends, and must be numbered from
    #: ``InputFile.first_index``.
    reads_byte_ranges: bool = False

    def parse(self, file: InputFile, stream: BinaryIO, step: str) -> Iterator[Outcome]:
        """Yields a record, a Skip or a DeadLetter for every record of ``file``."""
        raise NotImplementedError


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
                yield DeadLetter(self._step, "no_match", str(missing), file=pattern)
        # Sorted and de-duplicated across the patterns, as the reader's files.
        files = tuple(match_inputs(matched)) if matched else ()
        _LOGGER.info("%s: %d input files match when the run starts.", self._step, len(files))
        if self._in_order:
            yield files
        else:
            yield from ((file,) for file in files)


class _ReadFiles(beam.DoFn):
    """Reads the records of a group of files, in order, and keeps the books.

    Every record a parser reports is counted as read and as emitted, skipped
    with a reason, or errored with a reason (a dead letter, passed on).
    ``skip`` and ``limit`` count documents across the group. Dead letters of
    the matching step are passed on as they are, counted there.
    """

    def __init__(
        self,
        parser: RecordParser,
        step: str,
        skip: int = 0,
        limit: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        progress_interval: float | None = 10.0,
    ):
        self._parser = parser
        self._step = step
        self._skip = skip
        self._limit = limit
        self._storage_options = dict(storage_options or {})
        self._progress_interval = progress_interval

    def process(self, files: tuple[InputFile, ...] | DeadLetter) -> Iterator[Outcome]:
        if isinstance(files, DeadLetter):
            yield files
            return
        metrics = StepMetrics(self._step)
        to_skip = self._skip
        remaining = self._limit
        for file in files:
            if remaining == 0:
                return
            for outcome in self._outcomes(file):
                metrics.received()
                if isinstance(outcome, Skip):
                    metrics.skipped(outcome.reason)
                elif isinstance(outcome, DeadLetter):
                    metrics.errored(outcome.reason)
                    yield outcome
                else:
                    if to_skip > 0:
                        to_skip -= 1
                        metrics.skipped("skip_option")
                        continue
                    metrics.emitted()
                    if isinstance(outcome, Document):
                        metrics.observe("doc_chars", len(outcome.text))
                    yield outcome
                    if remaining is not None:
                        remaining -= 1
                        if remaining == 0:
                            break
            # A file cut into byte ranges is read in several pieces: the one that starts it counts it.
            if file.start == 0:
                metrics.inc("files")
            metrics.inc("bytes", file.size)

    def _outcomes(self, file: InputFile) -> Iterator[Outcome]:
        """The file's records, its bytes read reported as progress as they are read."""
        reported = 0
        compression = self._parser.compression
        codec = infer_compression(file.url) if compression == "infer" else compression
        try:
            if file.end is None:
                # Decompressed here, not by fsspec, so that damage costs only the records it holds.
                opened = open_url(file.url, "rb", self._storage_options, None if codec in CODECS else compression)
                with opened as stream:
                    # The file as stored, under any decompression: its position is the input read so far.
                    stored = opened.fobjects[0]
                    # Unbuffered: a buffer would lose the bytes it holds when the damage is found.
                    records = Decompressed(stream, codec) if codec in CODECS else stream
                    for outcome in self._parser.parse(file, records, self._step):
                        reported = self._progress(stored.tell(), reported)
                        yield outcome
                return
            with open_url(file.url, "rb", self._storage_options) as stream:
                stream.seek(file.start)
                for outcome in self._parser.parse(file, _ByteRange(stream, file), self._step):
                    reported = self._progress(stream.tell() - file.start, reported)
                    yield outcome
        except DamagedStream as damage:
            yield DeadLetter(self._step, damage.reason, damage.message, file=file.url, offset=damage.offset)
        except Exception as exc:  # an unopenable file or a parser's unforeseen failure must not end the run
            yield DeadLetter(self._step, "read_failed", f"{type(exc).__name__}: {exc}", file=file.url)
        finally:
            if self._progress_interval is not None:
                unreported = max(file.size - reported, 0)
                record_progress(self._step, size=unreported, files=1, interval=self._progress_interval)

    def _progress(self, position: int, reported: int) -> int:
        """Reports the bytes read since ``reported``; returns what is now reported."""
        if position > reported and self._progress_interval is not None:
            record_progress(self._step, size=position - reported, interval=self._progress_interval)
            return position
        return reported


class _ByteRange(io.RawIOBase):
    """Reads the byte range of ``file`` from ``stream``, which stands at its start.

    Raises:
        DamagedStream: The file ends inside the range (it was cut short after
            the range was made).
    """

    def __init__(self, stream: BinaryIO, file: InputFile):
        self._stream = stream
        self._file = file
        self._left = file.end - file.start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            return 0
        with memoryview(buffer) as view:
            read = self._stream.readinto(view[: self._left])
        if not read:
            raise DamagedStream(
                "truncated",
                f"the file ends at byte {self._file.end - self._left}, inside the byte range "
                f"[{self._file.start}, {self._file.end}) being read (it was cut short after the range was made?)",
                self._file.end - self._left,
            )
        self._left -= read
        return read


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


def _check_byte_ranges(files: tuple[InputFile, ...], parser: RecordParser) -> None:
    ranged = [file for file in files if file.end is not None]
    if ranged and not parser.reads_byte_ranges:
        raise ValueError(f"{type(parser).__name__} reads whole files; byte ranges are for JSONL input.")
    for file in ranged:
        if infer_compression(file.url) is not None:
            raise ValueError(f"Cannot read a byte range of the compressed file {file.url}; pass the whole file.")
        if not 0 <= file.start <= file.end:
            raise ValueError(f"Byte range [{file.start}, {file.end}) of {file.url} is not a range.")


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
        paths: str | InputFile | Iterable[str | InputFile],
        parser: RecordParser,
        *,
        skip: int = 0,
        limit: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        progress_interval: float | None = 10.0,
    ):
        """Matches the input files now, so a wrong path fails before any work.

        The pipeline graph holds ``paths``, not the files they match, so its
        size does not grow with the number of files.

        Args:
            paths: Files, directories or glob patterns (paths or fsspec URLs),
                or matched :class:`~beamtrove.fs.InputFile` entries.
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

        Raises:
            FileNotFoundError: A path does not exist or a pattern matches no file.
            ValueError: ``skip`` or ``limit`` is negative, or a byte range is
                given for a parser or a file that cannot be read in part.
        """
        super().__init__()
        if skip < 0 or (limit is not None and limit < 0):
            raise ValueError(f"skip and limit must not be negative (got skip={skip}, limit={limit}).")
        #: What was asked for: the paths and patterns, as given.
        self.patterns = (paths,) if isinstance(paths, (str, InputFile)) else tuple(paths)
        #: The files matched now. A run matches the patterns again when it starts and reads what matches then.
        self.files = tuple(match_inputs(self.patterns, parser.suffixes, storage_options))
        _check_byte_ranges(self.files, parser)
        self._parser = parser
        self._skip = skip
        self._limit = limit
        self._storage_options = storage_options
        self._progress_interval = progress_interval
        self._dead_letters = False

    def with_dead_letters(self) -> FileReader:
        """Makes the reader return ``(documents, dead_letters)``."""
        self._dead_letters = True
        return self

    def read_file(self, file: InputFile) -> Iterator[Any]:
        """The records and dead letters of one of :attr:`files`, counted as the transform counts them."""
        return self._read_files().process((file,))

    def _read_files(self) -> _ReadFiles:
        return _ReadFiles(
            self._parser, self.label, self._skip, self._limit, self._storage_options, self._progress_interval
        )

    def expand(self, pbegin):
        # The graph holds the patterns, not the files they match: its size does not grow with the input. (Matched
        # InputFile entries, as --input_ranges and Hugging Face datasets give them, are a list by nature.)
        match = _MatchFiles(
            self._parser.suffixes,
            self.label,
            dict(self._storage_options or {}),
            in_order=self._skip > 0 or self._limit is not None,
        )
        outputs = (
            pbegin
            | "Inputs" >> beam.Create([self.patterns])
            | "MatchFiles" >> beam.ParDo(match)
            # Spreads the files over all workers: one file is one unit of work.
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles" >> beam.ParDo(self._read_files())
            | "SplitDeadLetters" >> beam.ParDo(_SplitDeadLetters()).with_outputs(DEAD_LETTERS, main="documents")
        )
        outputs.documents.element_type = self.element_type
        return (outputs.documents, outputs[DEAD_LETTERS]) if self._dead_letters else outputs.documents
