"""The output folder contract: an output folder holds exactly what its run produced.

Before a run, :func:`plan_output` takes the output folder's lock, then checks it:

* one run owns an output folder at a time: its lock
  (:mod:`beamtrove.execution.output_lock`) refuses a second one, naming the
  owner (host, pid, start), and is taken over from a run that is gone (its
  process died on this host, it has not renewed its heartbeat for
  :data:`LOCK_TIMEOUT_SECONDS`, or its claim cannot be read and is that old);
* a publish an earlier run was stopped in is finished, or, if the run had
  not finished, what it staged is removed, and a warning says which;
* a folder that holds anything is refused, naming what is there, unless the
  run replaces it (``--overwrite``) or continues it (``--resumable`` on the
  output of a resumable run with the same configuration, see
  :mod:`beamtrove.execution.resume`);
* an input inside the output, or an output inside an input folder, is
  refused: the run, or the next one, would read its own results
  (:mod:`beamtrove.execution.output_checks`).

An ordinary run then writes everything under
``<output>/.beamtrove-staging/<run>/``, and publishing moves it into the
output folder once every writer has finished, replacing the old outputs with
``--overwrite``. A run that fails or is interrupted before it publishes
leaves the output folder as it was. A resumable run publishes input by input
instead (:mod:`beamtrove.transforms.per_input`).

Publishing can be stopped at any instant and finished later
(:mod:`beamtrove.execution.output_publish`): the old output and the new
one are both whole at every instant, one in the folder, the other in its
staging folder, but for the entries moved so far.

A local run (:func:`beamtrove.execution.run.run_pipeline`) publishes after
its pipeline, with its ``stats.json`` and ``report.html``; a graph built for
Dataflow publishes in its last step (:class:`Publish`), so a job whose
launcher does not wait for it publishes its outputs too. The lock covers the
launcher: it is held while the launching process runs (a local run until it
ends), not by the Dataflow workers of a job its launcher no longer waits for.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import uuid
from collections.abc import Mapping
from typing import Any

import apache_beam as beam

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.output_checks import check_auxiliary_inputs, check_separate
from beamtrove.execution.output_lock import LOCK_TIMEOUT_SECONDS, OutputLock, lock_output
from beamtrove.execution.output_publish import (
    COMMITTED_PHASES,
    discard_staging,
    folder_names,
    name_listing,
    publish_phase,
    publish_staged,
    record_staged,
    recover_output,
)
from beamtrove.fs import filesystem, is_local, join
from beamtrove.layout import FORMER_JOB_DIR, JOB_DIR, LOCK_DIR, RESUME_CONFIG_FILE, STAGING_DIR

__all__ = [
    "LOCK_TIMEOUT_SECONDS",
    "OutputPlan",
    "Publish",
    "check_auxiliary_inputs",
    "check_separate",
    "discard_staging",
    "output_entries",
    "plan_output",
    "recover_output",
]

_LOGGER = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class OutputPlan:
    """Where a run writes and how its outputs reach the output folder.

    Attributes:
        output: The output folder.
        write_to: Where the run's writers write: a staging folder inside
            ``output`` that :class:`Publish` moves into place, or ``output``
            itself for a resumable run.
        replaces: The old outputs publishing removes: with ``--overwrite``,
            everything ``output`` held when the run was built.
        creates: The outermost folder the run creates to make ``output``:
            ``output`` itself, or on this machine's file system a missing
            folder holding it; None when ``output`` exists.
        storage_options: fsspec filesystem options.
        lock: The run's hold on ``output``; None for a plan that does not
            look at the output (a graph built offline), and in the copy of
            the plan a pipeline's workers get.
    """

    output: str
    write_to: str
    replaces: tuple[str, ...] = ()
    creates: str | None = None
    storage_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    lock: OutputLock | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def staged(self) -> bool:
        return self.write_to != self.output

    def stage(self) -> None:
        """Makes the staging folder, recording the old outputs that publishing replaces; nothing when not staged."""
        if self.staged:
            record_staged(self.write_to, self.replaces, self.storage_options)

    def publish(self) -> list[str]:
        """Moves the staged outputs into the output folder, replacing the old ones; returns the names published.

        Safe to call again, by this run or any other, after an interrupt at
        any instant: it goes on from where the record says it stopped; once
        done, the staging folder is gone and a call does nothing.
        """
        published = publish_staged(self.output, self.write_to, self.storage_options)
        if self._owns_output():
            # The run owns the output: the staging folder holds nothing of another run.
            discard_staging(self.output, self.storage_options)
        return published

    def _owns_output(self) -> bool:
        """Whether this run still holds the output's lock (a run frozen past its timeout may have lost it).

        A plan without a lock (a pipeline's workers publishing for their launcher) counts as owning it.
        """
        return self.lock is None or self.lock.owned()

    def committed(self) -> bool:
        """Whether the run's publish has begun: from then on it is finished, never undone."""
        return self.staged and publish_phase(self.write_to, self.storage_options) in COMMITTED_PHASES

    def published(self) -> bool:
        """Whether the run's publish has finished: before the plan is abandoned, only publishing removes the staging
        folder."""
        if not self.staged:
            return False
        fs, path = filesystem(self.write_to, self.storage_options)
        return not fs.exists(path)

    def release(self) -> None:
        """Lets another run have the output folder."""
        if self.lock is not None:
            self.lock.release()

    def abandon(self) -> None:
        """Removes what a failed run left in flight, releases the lock, and removes ``output`` if made for nothing.

        The run owns the output, so the whole staging folder is its own; a
        publish it began is left for the next run to finish. A plan that
        never looked at the output (no lock: a graph built offline) leaves it
        untouched.
        """
        if self.lock is None:
            return
        if not self.committed() and self._owns_output():
            discard_staging(self.output, self.storage_options)
        self.release()
        if self.creates:
            _remove_if_empty(self.output, self.creates, self.storage_options)


def output_entries(output: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The names in the folder ``output`` other than the staging folder and the lock, sorted; empty when none.

    Raises:
        ConfigurationError: ``output`` is a file.
    """
    fs, path = filesystem(output, storage_options)
    if not fs.exists(path):
        return []
    if not fs.isdir(path):
        raise ConfigurationError(f"--output {output} is a file: pass a folder (it is created if missing).")
    return [name for name in folder_names(fs, path) if name not in (STAGING_DIR, LOCK_DIR, JOB_DIR, FORMER_JOB_DIR)]


def plan_output(
    output: str,
    *,
    overwrite: bool = False,
    resumable: bool = False,
    restart: bool = False,
    inspect: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    offers_resumable: bool = False,
) -> OutputPlan:
    """Takes the lock of ``output`` for a new run, checks it, recovers what earlier runs left, says where to write.

    A resumable run into the output of a resumable run, or one told to
    ``restart`` it, leaves the output to
    :func:`~beamtrove.execution.resume.pending_inputs`, which verifies or
    clears it. With ``inspect`` off, the output is not looked at, nor
    locked: the plan of a graph built offline or of a dry run. The plan
    holds the lock until :meth:`OutputPlan.release` or
    :meth:`OutputPlan.abandon`. ``offers_resumable`` says whether the
    command takes ``--resumable``, which refusing a used output then
    suggests.

    Raises:
        ConfigurationError: ``output`` is a file or cannot be written,
            another run owns it, or it holds something the run may not
            replace; the message names it and the options that would.
    """
    storage_options = dict(storage_options or {})
    if resumable and overwrite:
        raise ConfigurationError(
            "--overwrite replaces an output when a run succeeds, but a --resumable run builds its output input by "
            "input: pass --restart to start a resumable output over, or leave out --resumable."
        )
    if not inspect:
        return _new_plan(output, resumable, (), False, storage_options, None)
    output_entries(output, storage_options)  # refuses a file before anything is written
    creates = _outermost_missing(output, storage_options)
    lock = None
    try:
        try:
            lock = lock_output(output, storage_options)  # the run's first write
        except OSError as exc:
            raise ConfigurationError(_unwritable(output, exc)) from None
        recover_output(output, storage_options)
        entries = output_entries(output, storage_options)
        if entries and not overwrite:
            if not resumable:
                choices = ["choose another --output", "pass --overwrite to replace it once this run succeeds"]
                if offers_resumable:
                    choices.append("--resumable to continue a resumable run in it")
                raise ConfigurationError(
                    f"--output {output} already holds {name_listing(entries)}: {', '.join(choices[:-1])}, or "
                    f"{choices[-1]}."
                )
            if RESUME_CONFIG_FILE not in entries and not restart:
                raise ConfigurationError(
                    f"--output {output} holds {name_listing(entries)} from a run that was not --resumable, which a "
                    "resumable run cannot verify or continue: choose another --output, or pass --restart to delete "
                    "it and start over."
                )
    except BaseException:
        if lock is not None:
            lock.release()
        if creates:
            _remove_if_empty(output, creates, storage_options)
        raise
    replaces = tuple(entries) if overwrite else ()
    return _new_plan(output, resumable, replaces, creates, storage_options, lock)


def _unwritable(output: str, failure: OSError) -> str:
    """Says that ``output`` cannot be written, and in which folder (where a new file or folder was refused)."""
    folder = posixpath.dirname(str(failure.filename).rstrip("/")) if failure.filename else output
    return (
        f"--output {output} cannot be written: {folder} refuses new files ({failure.strerror or failure}); choose "
        "an --output in a folder this user can write to."
    )


def _new_plan(
    output: str,
    resumable: bool,
    replaces: tuple[str, ...],
    creates: bool,
    storage_options: Mapping[str, Any],
    lock: OutputLock | None,
) -> OutputPlan:
    write_to = output if resumable else join(output, STAGING_DIR, uuid.uuid4().hex)
    return OutputPlan(output, write_to, replaces, creates, storage_options, lock)


def _outermost_missing(url: str, storage_options: Mapping[str, Any]) -> str | None:
    """The outermost of the folder ``url`` and those holding it that do not exist; None when ``url`` exists.

    Only on this machine's file system: an object store has no empty folders to leave behind.
    """
    fs, path = filesystem(url, storage_options)
    if fs.exists(path):
        return None
    if not is_local(url):
        return url
    while not fs.exists(parent := posixpath.dirname(path)) and parent != path:
        path = parent
    return path


def _remove_if_empty(folder: str, outermost: str, storage_options: Mapping[str, Any]) -> None:
    """Removes ``folder`` if it is empty, then each folder holding it up to ``outermost``, while they are empty."""
    fs, path = filesystem(folder, storage_options)
    top = filesystem(outermost, storage_options)[1]
    while fs.exists(path) and not fs.ls(path, detail=False):
        fs.rmdir(path)
        if path == top:
            return
        path = posixpath.dirname(path)


class _PublishFn(beam.DoFn):
    """Publishes a run's staged outputs (:meth:`OutputPlan.publish`): safe to retry, and done once."""

    def __init__(self, plan: OutputPlan):
        self._plan = plan

    def process(self, files_written: int):
        published = self._plan.publish()
        _LOGGER.info(
            "published %s (%d files) to %s", ", ".join(published) or "nothing", files_written, self._plan.output
        )
        yield files_written


class Publish(beam.PTransform):
    """Moves a run's staged outputs into its output folder once every file has been written.

    Applied to the files every writer of the run wrote (their results,
    flattened), it waits for all of them, then publishes once.
    """

    def __init__(self, plan: OutputPlan):
        super().__init__()
        # The lock stays with the launcher: workers get the plan without it.
        self._plan = dataclasses.replace(plan, lock=None)

    def expand(self, written_files):
        return (
            written_files
            | "CountWritten" >> beam.combiners.Count.Globally()
            | "MoveIntoPlace" >> beam.ParDo(_PublishFn(self._plan))
        )
