"""How files become records: the parser contract, and reading files with the books kept.

A format is a :class:`RecordParser`: how to turn the bytes of one file into
records. :func:`match_files` matches a reader's inputs and
:class:`RecordReader` reads each file through its parser, decompressing by file name so that damage costs only the
records it holds. It keeps the books, not the parsers: every record a parser
reports is counted as read and as emitted, skipped with a reason, or errored
with a reason (a :class:`~beamtrove.dead_letter.DeadLetter`). The Beam
readers (:mod:`beamtrove.transforms.readers`) read this way inside a
pipeline, counting into Beam Metrics; commands that read files outside one
(``inspect``, ``report``, ``train-classifier``) read the same way with no
Beam imported.
"""

from __future__ import annotations

import dataclasses
import functools
import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, Protocol

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.formats.compression import CODECS, DamagedStream, Decompressed
from beamtrove.fs import FileListing, InputFile, compression_of, match_inputs, open_resuming, open_url
from beamtrove.network import ReadGaveUp, RetryPolicy
from beamtrove.progress import record_progress

__all__ = ["Counts", "Outcome", "RecordParser", "RecordReader", "Skip", "match_files"]


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
    catch :class:`~beamtrove.formats.compression.DamagedStream`
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


class Counts(Protocol):
    """Where reading reports what became of each record: a step's counters (see :mod:`beamtrove.metrics`)."""

    def received(self, count: int = 1) -> None: ...
    def emitted(self, count: int = 1) -> None: ...
    def skipped(self, reason: str) -> None: ...
    def errored(self, reason: str) -> None: ...
    def observe(self, name: str, value: int) -> None: ...
    def inc(self, name: str, value: int = 1) -> None: ...


class _Uncounted:
    """Counts nothing: files read back outside any run (an output shown, a classifier's examples) count in none."""

    def received(self, count: int = 1) -> None:
        pass

    def emitted(self, count: int = 1) -> None:
        pass

    def skipped(self, reason: str) -> None:
        pass

    def errored(self, reason: str) -> None:
        pass

    def observe(self, name: str, value: int) -> None:
        pass

    def inc(self, name: str, value: int = 1) -> None:
        pass


def match_files(
    paths: str | InputFile | FileListing | Iterable[str | InputFile | FileListing],
    parser: RecordParser,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[InputFile, ...]:
    """The files ``paths`` match that ``parser`` reads, sorted and without repeats.

    Args:
        paths: Files, directories or glob patterns (paths or fsspec URLs), or
            matched :class:`~beamtrove.fs.InputFile` entries.
        parser: What will read them: directories are searched for its suffixes.
        storage_options: fsspec filesystem options (credentials, ...).

    Raises:
        FileNotFoundError: A path does not exist or a pattern matches no file.
        ValueError: A byte range is given for a parser or a file that cannot
            be read in part.
    """
    patterns = (paths,) if isinstance(paths, (str, InputFile, FileListing)) else tuple(paths)
    files = tuple(match_inputs(patterns, parser.suffixes, storage_options))
    _check_byte_ranges(files, parser)
    return files


class RecordReader:
    """Reads files through a parser and keeps the books of every record.

    Holds no files: a reader made once reads any of them, on any worker.
    """

    def __init__(
        self,
        parser: RecordParser,
        *,
        skip: int = 0,
        limit: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        progress_interval: float | None = 10.0,
        retries: RetryPolicy | None = None,
    ):
        """Checks the settings.

        Args:
            parser: Turns one file into records.
            skip: Documents to skip at the start of the files read together,
                counted as ``skipped.skip_option``.
            limit: Stop after this many documents.
            storage_options: fsspec filesystem options (credentials, ...).
            progress_interval: Seconds between progress log lines; 0 turns
                them off. None: what is read is no input of a run (a run
                folder read back for its report), so it counts in no progress.
            retries: How transient faults of a network or a store are waited
                out; the default policy when None.

        Raises:
            ValueError: ``skip`` or ``limit`` is negative.
        """
        if skip < 0 or (limit is not None and limit < 0):
            raise ValueError(f"skip and limit must not be negative (got skip={skip}, limit={limit}).")
        self.parser = parser
        self.skip = skip
        self.limit = limit
        self.storage_options = dict(storage_options or {})
        self.progress_interval = progress_interval
        self.retries = retries or RetryPolicy()

    def read(self, files: Sequence[InputFile], step: str, counts: Counts | None = None) -> Iterator[Outcome]:
        """The records and dead letters of ``files``, in order, each counted into ``counts``.

        ``skip`` and ``limit`` count documents across ``files``.

        Args:
            files: Files :func:`match_files` matched for this parser.
            step: The reading step, named in its dead letters and progress.
            counts: The step's counters; None counts nothing.
        """
        counts = _Uncounted() if counts is None else counts
        to_skip = self.skip
        remaining = self.limit
        for file in files:
            if remaining == 0:
                return
            for outcome in self._outcomes(file, step, counts):
                counts.received()
                if isinstance(outcome, Skip):
                    counts.skipped(outcome.reason)
                elif isinstance(outcome, DeadLetter):
                    counts.errored(outcome.reason)
                    yield outcome
                else:
                    if to_skip > 0:
                        to_skip -= 1
                        counts.skipped("skip_option")
                        continue
                    counts.emitted()
                    if isinstance(outcome, Document):
                        counts.observe("doc_chars", len(outcome.text))
                    yield outcome
                    if remaining is not None:
                        remaining -= 1
                        if remaining == 0:
                            break
            # A file cut into byte ranges is read in several pieces: the one that starts it counts it.
            if file.start == 0:
                counts.inc("files")

    def read_file(self, file: InputFile, step: str, counts: Counts | None = None) -> Iterator[Outcome]:
        """The records and dead letters of ``file``, as :meth:`read` reads them."""
        return self.read((file,), step, counts)

    def _outcomes(self, file: InputFile, step: str, counts: Counts) -> Iterator[Outcome]:
        """The file's records, its bytes read reported as progress as they are read.

        The file is read through transient faults of a network or a store,
        each counted as ``retries.<fault>``; one that keeps failing is a dead
        letter (``network_failed``) after the records read before it.
        """
        reported = 0
        compression = self.parser.compression
        codec = compression_of(file.url) if compression == "infer" else compression
        try:
            if codec is not None and codec not in CODECS:
                # A codec only fsspec knows: it decompresses, and damage or a fault ends the file where it is found.
                with open_url(file.url, "rb", self.storage_options, codec) as stream:
                    yield from self.parser.parse(file, stream, step)
                return
            on_retry = functools.partial(_count_retry, counts)
            with open_resuming(file.url, self.storage_options, self.retries, on_retry) as stored:
                if file.end is None:
                    # Decompressed here, not by fsspec, so that damage costs only the records it holds; unbuffered,
                    # as a buffer would lose the bytes it holds when the damage is found.
                    records = Decompressed(stored, codec) if codec else stored
                else:
                    stored.seek(file.start)
                    records = _ByteRange(stored, file)
                for outcome in self.parser.parse(file, records, step):
                    # The file as stored, under any decompression: its position is the input read so far.
                    reported = self._progress(step, stored.tell() - file.start, reported)
                    yield outcome
        except ReadGaveUp as failure:
            yield DeadLetter(step, "network_failed", failure.message, file=file.url, offset=failure.offset)
        except DamagedStream as damage:
            yield DeadLetter(step, damage.reason, damage.message, file=file.url, offset=damage.offset)
        except Exception as exc:  # an unopenable file or a parser's unforeseen failure must not end the run
            yield DeadLetter(step, "read_failed", f"{type(exc).__name__}: {exc}", file=file.url)
        finally:
            # A file listed without its size (a Common Crawl paths file's) counts the bytes read from it.
            counts.inc("bytes", file.size or reported)
            if self.progress_interval is not None:
                unreported = max(file.size - reported, 0)
                record_progress(step, size=unreported, files=1, interval=self.progress_interval)

    def _progress(self, step: str, position: int, reported: int) -> int:
        """Reports the bytes read since ``reported``; returns what is now reported."""
        if position > reported and self.progress_interval is not None:
            record_progress(step, size=position - reported, interval=self.progress_interval)
            return position
        return reported


def _count_retry(counts: Counts, fault: str) -> None:
    counts.inc(f"retries.{fault}")


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


def _check_byte_ranges(files: tuple[InputFile, ...], parser: RecordParser) -> None:
    ranged = [file for file in files if file.end is not None]
    if ranged and not parser.reads_byte_ranges:
        raise ValueError(f"{type(parser).__name__} reads whole files; byte ranges are for JSONL input.")
    for file in ranged:
        if compression_of(file.url) is not None:
            raise ValueError(f"Cannot read a byte range of the compressed file {file.url}; pass the whole file.")
        if not 0 <= file.start <= file.end:
            raise ValueError(f"Byte range [{file.start}, {file.end}) of {file.url} is not a range.")
