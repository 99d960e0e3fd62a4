"""Reading a run's output folder: the documents it kept, what its steps set aside, what it counted.

:class:`RunOutput` is the one reader of the folders :mod:`beamtrove.layout`
describes: ``beamtrove report``, ``beamtrove inspect``, pipelines whose input
is a run's output folder, and ``beamtrove elastic merge`` (which lays shards'
outputs into one folder) all read them through it. Records stream file after
file in name order: a file is opened only once the records before it were
taken, so the first records of a large folder cost only their own reading,
and no more than a file's read buffer (a Parquet file's batch of rows) is
held at a time.

Before a folder is read, :func:`ready_to_read` says what state it is in:
a publish a run was stopped in is finished first, as the next run into the
folder would finish it; a folder that cannot be read whole yet is refused in
one line saying why and what to do.

Files are read in the formats beamtrove's writers write, told by their
names: JSON Lines (plain, ``.gz``, ``.zst``, ...) and Parquet.
:func:`read_documents` reads other files of documents the same way, in any
format a run reads them in. A line or a
part of a file that cannot be read is a
:class:`~beamtrove.dead_letter.DeadLetter` in its place, and reading goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from beamtrove.configuration import ConfigurationError
from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document
from beamtrove.execution.output_lock import OutputInUse, lock_holder, lock_output
from beamtrove.execution.output_publish import publish_begun, recover_output
from beamtrove.formats import HUGGING_FACE, SUFFIXES, parser_class
from beamtrove.formats.records import RecordReader, match_files
from beamtrove.formats.rows import RowError, RowFields
from beamtrove.fs import InputFile, filesystem, is_glob, is_hidden, join, match_inputs
from beamtrove.layout import (
    CLUSTERS_DIR,
    DEAD_LETTERS_DIR,
    DOCUMENTS_DIR,
    EXCLUDED_DIR,
    FILTER_REASON_KEY,
    JOB_DIR,
    READ,
    RUN_MARKS,
    STATS_FILE,
)
from beamtrove.stats import read_stats

if TYPE_CHECKING:
    from beamtrove.transforms.dedup.keep import ClusterMember

__all__ = ["OutputRecord", "Records", "RunOutput", "documents_of_run", "read_documents", "ready_to_read"]

_LOGGER = logging.getLogger(__name__)

# The formats of the files beamtrove's writers write, told by the endings of their names.
_DOCUMENT_FORMATS = ("jsonl", "parquet")
# The step named in the dead letters of a run folder read back: a line it cannot read, a damaged file.
_READ_BACK = "read_output"


@dataclasses.dataclass(frozen=True)
class OutputRecord:
    """A document of a run's output as read, or a dead letter shown as one.

    Attributes:
        document: The document; for a dead letter, its excerpt as the text,
            its record's id as the id and the whole record as metadata.
        step: The step that set it aside: the one that excluded the
            document, or the one a dead letter names; None for a kept document.
        reason: Why: an excluded document's ``filter_reason``, a dead
            letter's reason; None when it has none.
    """

    document: Document
    step: str | None = None
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class _WholeRows(RowFields):
    """Takes each JSON row whole, as ``make`` builds it, rather than as the fields of a document."""

    make: Callable[[dict[str, Any]], Any] = dict

    def to_document(self, row: dict[str, Any], file: InputFile, index: int) -> Any:
        try:
            return self.make(row)
        except (KeyError, TypeError, ValueError) as exc:
            raise RowError("malformed_row", f"the row is not what {file.name} holds: {exc}") from None


def _dead_letter_document(row: dict[str, Any]) -> Document:
    return Document(text=str(row.get("excerpt") or ""), id=str(row.get("record_id") or ""), metadata=row)


def _documents_of(step: str | None) -> Callable[[Document], OutputRecord]:
    """Makes the records of documents that ``step`` excluded (None: of documents kept, or of any files)."""

    def record(document: Document) -> OutputRecord:
        reason = document.metadata.get(FILTER_REASON_KEY)
        return OutputRecord(document, step, None if reason is None else str(reason))

    return record


def _dead_letter(document: Document) -> OutputRecord:
    letter = document.metadata
    step, reason = letter.get("step"), letter.get("reason")
    return OutputRecord(document, None if step is None else str(step), None if reason is None else str(reason))


class _Part(NamedTuple):
    file: InputFile
    read: Callable[[InputFile], Iterable[Any]]
    wrap: Callable[[Any], Any]


class Records:
    """Records of files read one after the other: a file is opened only once the records before it were taken.

    Iterating yields each record (an :class:`OutputRecord`, or what the
    reader of a cluster map makes) or, where a record or the rest of a file
    cannot be read, a :class:`~beamtrove.dead_letter.DeadLetter` saying where
    and why; each iteration reads the files anew.

    Attributes:
        files: The files, in the order they are read.
    """

    def __init__(self, parts: Iterable[_Part] = ()):
        self._parts = tuple(parts)
        self.files: tuple[InputFile, ...] = tuple(part.file for part in self._parts)

    @classmethod
    def of(cls, files: Iterable[InputFile], read: Callable[[InputFile], Iterable[Any]]) -> Records:
        """The documents ``read`` reads from each of ``files``, each with the ``filter_reason`` it has, if any."""
        wrap = _documents_of(None)
        return cls(_Part(file, read, wrap) for file in files)

    def __add__(self, other: Records) -> Records:
        return Records((*self._parts, *other._parts))

    def __iter__(self) -> Iterator[Any]:
        for part in self._parts:
            for outcome in part.read(part.file):
                yield outcome if isinstance(outcome, DeadLetter) else part.wrap(outcome)


def read_documents(paths: Sequence[str], file_format: str) -> Records:
    """The documents of files, folders or globs in ``file_format``, read as a run's inputs are, outside any run.

    Args:
        paths: What to read.
        file_format: A format :func:`~beamtrove.formats.input_format` told:
            one of :data:`~beamtrove.formats.FILE_FORMATS` or ``hf``.

    Raises:
        FileNotFoundError: A path does not exist or a pattern matches no file.
        ValueError: The paths are not what ``file_format`` reads (a Hugging
            Face folder without the split asked for, ...).
    """
    if file_format == HUGGING_FACE:
        # The Beam reader says which files make a split and how their rows become documents. It imports Beam,
        # which the commands that only read run folders (inspect, report) start without.
        from beamtrove.transforms.readers import ReadHuggingFace  # noqa: PLC0415

        dataset = ReadHuggingFace(paths, progress_interval=0)
        return Records.of(dataset.files, dataset.read_file)
    parser = parser_class(file_format)()
    reader = RecordReader(parser, progress_interval=0)
    return Records.of(match_files(paths, parser), functools.partial(reader.read_file, step=READ))


def ready_to_read(path: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Makes the run folder ``path`` whole to read, or refuses it saying why; nothing for what is not a folder.

    Every command that reads a run folder calls it first (through
    :meth:`RunOutput.at`, or itself). A publish a run was stopped in (Ctrl-C,
    SIGKILL, a lost machine: the folder holds part of its outputs) is
    finished holding the folder's lock, as the next run into it would
    finish it, with the same warning.

    Raises:
        ConfigurationError: The folder cannot be read whole yet: a run holds
            it in the middle of a publish, the publish cannot be finished
            here (the folder is read-only), or it holds no outputs but those
            of a ``--staged`` run that has not finished; the message says
            which and what to do.
    """
    fs, fs_path = filesystem(path, storage_options)
    if is_glob(fs, fs_path) or not fs.isdir(fs_path):
        return
    if publish_begun(path, storage_options):
        _finish_publish(path, storage_options)
    elif fs.exists(join(fs_path, JOB_DIR)) and not any(fs.exists(join(fs_path, mark)) for mark in RUN_MARKS):
        owner = lock_holder(path, storage_options)
        raise ConfigurationError(
            f"{path} holds no outputs yet: a --staged run into it "
            + (
                f"is running ({owner}): wait until it ends"
                if owner
                else f"has not finished (its tasks are in {JOB_DIR}/): rerun the same command to go on from "
                "the tasks it did"
            )
        )


def _finish_publish(path: str, storage_options: Mapping[str, Any] | None) -> None:
    """Finishes the publish a run was stopped in, holding the folder's lock.

    Raises:
        ConfigurationError: A live run holds the folder, or it cannot be written.
    """
    try:
        lock = lock_output(path, storage_options)
    except OutputInUse as exc:
        raise ConfigurationError(
            f"{path}: a publish into it is unfinished and a run holds the folder ({exc.owner}): wait until that run "
            f"ends, then run this command again; {exc.takeover}."
        ) from None
    except OSError as exc:
        raise _cannot_finish(path, exc) from None
    try:
        recover_output(path, storage_options)
    except OSError as exc:
        raise _cannot_finish(path, exc) from None
    finally:
        lock.release()


def _cannot_finish(path: str, exc: OSError) -> ConfigurationError:
    return ConfigurationError(
        f"{path}: a run was stopped while publishing its outputs into it, so it holds only part of them, and the "
        f"publish cannot be finished here ({exc.strerror or exc}): `beamtrove stats {path}` where the folder can be "
        "written, or the next `beamtrove run` into it, finishes it."
    )


class RunOutput:
    """The output folder of a beamtrove run, to read.

    Attributes:
        folder: The folder, as given.
    """

    def __init__(self, folder: str, storage_options: Mapping[str, Any] | None = None):
        self.folder = folder
        self._storage_options = dict(storage_options or {})

    @classmethod
    def at(cls, path: str, storage_options: Mapping[str, Any] | None = None) -> RunOutput | None:
        """The run's output folder ``path`` names; None when it names a file, a glob or another folder.

        A folder is a run's output when it holds one of
        :data:`~beamtrove.layout.RUN_MARKS`, as for
        :func:`~beamtrove.fs.match_inputs`, which reads such a folder as the
        documents its run kept. The folder is made whole to read first
        (:func:`ready_to_read`).

        Raises:
            ConfigurationError: As :func:`ready_to_read`.
        """
        if not path.strip():
            # As a path, the current directory: no input names it.
            return None
        ready_to_read(path, storage_options)
        fs, fs_path = filesystem(path, storage_options)
        if is_glob(fs, fs_path) or not fs.isdir(fs_path):
            return None
        if not any(fs.exists(join(fs_path, mark)) for mark in RUN_MARKS):
            return None
        return cls(path, storage_options)

    def path(self, *parts: str) -> str:
        """``parts`` joined under the folder."""
        return join(self.folder, *parts)

    def holds(self, *parts: str) -> bool:
        """Whether the folder holds ``parts`` (a file or a folder)."""
        fs, path = filesystem(self.path(*parts), self._storage_options)
        return fs.exists(path)

    def stats(self) -> dict[str, Any]:
        """Its ``stats.json``.

        Raises:
            FileNotFoundError: It has none.
            ConfigurationError: It is damaged (:func:`~beamtrove.stats.read_stats`).
        """
        return read_stats(self.path(STATS_FILE), self._storage_options)

    @property
    def documents_folder(self) -> str:
        """Where the kept documents are: ``documents/``, or the folder itself for a run that writes them there.

        In the folder itself (as ``convert`` writes them), they are what it
        holds besides what its run set aside.
        """
        fs, path = filesystem(self.path(DOCUMENTS_DIR), self._storage_options)
        return self.path(DOCUMENTS_DIR) if fs.isdir(path) else self.folder

    def documents(self) -> Records:
        """The documents the run kept, in file-name order; no files when it kept none."""
        return self._records(self._files(self.documents_folder, _DOCUMENT_FORMATS), _documents_of(None))

    def excluded_steps(self) -> list[str]:
        """The steps that excluded documents (the folders of ``excluded/``), by name."""
        return self._subfolders(EXCLUDED_DIR)

    def excluded(self, steps: str | Sequence[str] | None = None) -> Records:
        """What ``steps`` excluded, step after step in the order given; by default every step's, by name."""
        steps = self.excluded_steps() if steps is None else [steps] if isinstance(steps, str) else steps
        records = Records()
        for step in steps:
            files = self._files(self.path(EXCLUDED_DIR, step), _DOCUMENT_FORMATS)
            records += self._records(files, _documents_of(step))
        return records

    def dead_letters(self) -> Records:
        """The records the run could not read or process, each with its reason and the step that gave up."""
        files = self._files(self.path(DEAD_LETTERS_DIR), ("jsonl",))
        return self._records(files, _dead_letter, _WholeRows(make=_dead_letter_document))

    def cluster_steps(self) -> list[str]:
        """The dedup steps that wrote a cluster map (the folders of ``clusters/``), by name."""
        return self._subfolders(CLUSTERS_DIR)

    def clusters(self, step: str) -> Records:
        """The cluster map of the dedup step ``step``: a :class:`~beamtrove.transforms.dedup.ClusterMember` each."""
        # Imported here: the dedup package is large, and only readers of cluster maps need it.
        from beamtrove.transforms.dedup.keep import ClusterMember  # noqa: PLC0415

        def member(row: dict[str, Any]) -> ClusterMember:
            return ClusterMember(**row)

        files = self._files(self.path(CLUSTERS_DIR, step), ("jsonl",))
        return self._records(files, lambda outcome: outcome, _WholeRows(make=member))

    def _subfolders(self, name: str) -> list[str]:
        fs, path = filesystem(self.path(name), self._storage_options)
        if not fs.isdir(path):
            return []
        names = (
            entry["name"].rstrip("/").rsplit("/", 1)[-1]
            for entry in fs.ls(path, detail=True)
            if entry["type"] == "directory"
        )
        return sorted(name for name in names if not is_hidden(name))

    def _files(self, folder: str, formats: Sequence[str]) -> list[InputFile]:
        """The data files under ``folder`` in name order, each of one of ``formats``; none when it holds none."""
        suffixes = tuple(suffix for file_format in formats for suffix in SUFFIXES[file_format])
        try:
            return match_inputs(folder, suffixes, self._storage_options, warn_empty_runs=False)
        except FileNotFoundError:
            return []

    def _records(
        self, files: Sequence[InputFile], wrap: Callable[[Any], Any], fields: RowFields | None = None
    ) -> Records:
        """``files`` read by the parser their names call for, each outcome made a record by ``wrap``."""
        parts = []
        readers: dict[str, RecordReader] = {}
        for file in files:
            file_format = next(name for name in _DOCUMENT_FORMATS if file.name.endswith(SUFFIXES[name]))
            if file_format not in readers:
                parser = parser_class(file_format)
                made = parser() if fields is None else parser(fields)
                # A run folder read back is no input of a run: it counts in no run's progress.
                readers[file_format] = RecordReader(made, storage_options=self._storage_options, progress_interval=None)
            parts.append(_Part(file, functools.partial(readers[file_format].read_file, step=_READ_BACK), wrap))
        return Records(parts)


def documents_of_run(pattern: str) -> str:
    """The ``documents/`` folder of a beamtrove run's output given as input, else the input as given.

    A run's output also holds what it excluded and its dead letters, which
    are not the documents it produced: a folder read as input never yields
    them (:func:`~beamtrove.fs.match_inputs`), so the output of a run that
    kept nothing is an empty input, with a warning.
    """
    run = RunOutput.at(pattern)
    documents = run and run.documents_folder
    if run is None or documents == run.folder:
        # Not a run's output; or one that kept nothing (match_inputs says so), or wrote its documents into the
        # folder itself (convert): what it kept is what the folder holds besides what it set aside.
        return pattern
    _LOGGER.warning("%s is the output of a beamtrove run: reading its documents only, from %s", pattern, documents)
    return documents
