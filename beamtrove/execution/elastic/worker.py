"""``beamtrove elastic worker``: claim shards, run the pipeline on each, publish done records.

Also the Slurm array script that runs one worker per array task
(``beamtrove elastic slurm-template``).
"""

from __future__ import annotations

import atexit
import importlib.resources
import multiprocessing
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from beamtrove.execution.direct_workers import direct_workers_given
from beamtrove.execution.elastic.jobdir import (
    ATTEMPT_FILE,
    ElasticError,
    JobDir,
    ShardLock,
    is_staged,
    publish_once,
)
from beamtrove.execution.elastic.publish import DEFAULT_SORT_MEMORY, collect_documents
from beamtrove.execution.elastic.scan import check_unchanged, shard_inputs, shard_sha256
from beamtrove.execution.elastic.status import job_progress, shard_states
from beamtrove.fs import join, write_local_atomically
from beamtrove.input_ranges import write_input_ranges
from beamtrove.layout import STATS_FILE
from beamtrove.options import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.processes import die_with_parent, stopped_by, stops_interrupt

__all__ = ["SHARD_DOCUMENTS", "run_worker", "slurm_array_script"]

SHARD_DOCUMENTS = "documents.jsonl.gz"
_LOG_TAIL_LINES = 20
_INPUTS_FILE = "inputs.json"
# Below this a run would hold only a few documents.
_MIN_SORT_MEMORY = 64 << 10


def _records_read(stats: pathlib.Path, read_label: str) -> int | None:
    """How many records the run's reader read (its ``in`` counter), None when the run wrote no stats.

    Verify compares it with the records the manifest gives the shard.
    """
    if not stats.exists():
        return None
    steps = orjson.loads(stats.read_bytes())["steps"]
    return steps.get(read_label, {}).get("counters", {}).get("in", 0)


def _log_tail(log: pathlib.Path) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:])
    except FileNotFoundError:
        return ""


def _run_forked(argv: list[str], log: pathlib.Path) -> None:
    """The body of an attempt's process forked from its worker: ``beamtrove <argv>``, as a new process runs it."""
    die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    output = os.open(log, os.O_WRONLY)
    os.dup2(output, sys.stdout.fileno())
    os.dup2(output, sys.stderr.fileno())
    os.close(output)
    # The worker's exit handlers are not this process's; the run's own (its output lock's) run as at any exit.
    atexit._clear()
    # Imported here: the command line imports this module.
    from beamtrove.cli import main  # noqa: PLC0415

    try:
        status = main(argv)
    finally:
        atexit._run_exitfuncs()
    sys.exit(status)


class _AttemptProcess:
    """The process that runs one attempt, its output in ``log``; the kernel stops it if the worker dies.

    Forked from the worker, which has imported Beam and beamtrove already (a
    new interpreter spends seconds on that), when no other thread runs in the
    worker, which a fork could catch holding a lock. Otherwise (``run_worker``
    called in a program with threads) it is :attr:`command` in a new interpreter.
    """

    def __init__(self, argv: list[str], log: pathlib.Path):
        self.command = [sys.executable, "-m", "beamtrove", *argv]
        self.forked = threading.active_count() == 1
        if self.forked:
            log.write_bytes(b"")
            self._process = multiprocessing.get_context("fork").Process(target=_run_forked, args=(argv, log))
            self._process.start()
            self.pid = self._process.pid
            return
        with open(log, "wb") as log_file:
            self._popen = subprocess.Popen(
                self.command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - a SIGKILLed worker cannot stop its pipeline
            )
        self.pid = self._popen.pid

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code (negative: the signal that ended it), None if it still runs after ``timeout`` seconds."""
        if self.forked:
            self._process.join(timeout)
            return self._process.exitcode
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILLs the process unless it has been waited for already (its pid may then be another's)."""
        if self.forked:
            self._process.kill()
        else:
            self._popen.kill()


class _Worker:
    def __init__(self, job: JobDir, host: str, echo: Callable[[str], None], sort_memory: int):
        self.job = job
        self.sort_memory = sort_memory
        self.manifest = job.manifest()
        self.host = host
        self.echo = echo
        self.timeout = self.manifest["lock_timeout"]
        self.spec = pipeline_spec(self.manifest["pipeline"]["name"])

    def open_shards(self) -> list[dict[str, Any]]:
        return [
            shard
            for shard in self.manifest["shards"]
            if not self.job.done_path(shard["id"]).exists() and not self.job.failed_path(shard["id"]).exists()
        ]

    def claim(self, shards: list[dict[str, Any]]) -> tuple[dict[str, Any], ShardLock] | None:
        for shard in shards:
            lock = self.job.try_lock(shard["id"], self.host)
            if lock is None and self.job.take_over_stale(shard["id"], self.timeout):
                self.echo(f"{shard['id']}: its lock went stale (no heartbeat for {self.timeout:g} s); taking over")
                lock = self.job.try_lock(shard["id"], self.host)
            if lock is None:
                continue
            if self.job.done_path(shard["id"]).exists() or self.job.failed_path(shard["id"]).exists():
                lock.release()  # finished between the listing and the claim
                continue
            return shard, lock
        return None

    def process(self, shard: dict[str, Any], lock: ShardLock) -> None:
        shard_id = shard["id"]
        attempts = self.job.attempts(shard_id)
        counted = self.job.spent_attempts(shard_id)
        allowed = 1 + self.manifest["max_retries"]
        if len(counted) >= allowed:
            self.fail(shard_id, len(counted), "no attempt left (the last ones were abandoned by dead workers)")
            return
        if shard_sha256(self.manifest, shard) != shard["sha256"]:
            raise ElasticError(
                f"The bytes of {shard_id} changed since prepare although sizes and times did not: "
                "restore the input, or prepare a new job directory."
            )
        safe_host = re.sub(r"[^A-Za-z0-9_.-]", "_", self.host)
        attempt_dir = self.job.attempts_dir(shard_id) / f"{len(attempts) + 1:02d}-{safe_host}-{os.getpid()}"
        attempt_dir.mkdir(parents=True)
        record = self.run_attempt(shard, lock, attempt_dir)
        if record["status"] == "succeeded":
            return
        if len(counted) + 1 >= allowed:
            self.fail(shard_id, len(counted) + 1, record.get("error", ""))
        else:
            last_line = (record.get("error") or "").strip().splitlines()[-1:] or [""]
            self.echo(f"{shard_id}: attempt {attempt_dir.name} failed ({last_line[0]}); it will be retried")

    def run_attempt(self, shard: dict[str, Any], lock: ShardLock, attempt_dir: pathlib.Path) -> dict[str, Any]:
        shard_id = shard["id"]
        inputs = attempt_dir / _INPUTS_FILE
        output = attempt_dir / "output"
        log = attempt_dir / "log.txt"
        write_input_ranges(shard_inputs(self.manifest, shard), str(inputs))
        runner_args = self.manifest["runner_args"]
        if not direct_workers_given(runner_args):
            # One process per attempt, as many attempts as workers: a node's workers share its cores.
            runner_args = [*runner_args, "--direct_running_mode=in_memory"]
        args = [*self.manifest["pipeline"]["args"], *runner_args]
        argv = ["run", self.manifest["pipeline"]["name"], *args, "--input_ranges", str(inputs), "--output", str(output)]
        started = time.time()
        record = {
            "shard": shard_id,
            "host": self.host,
            "pid": os.getpid(),
            "token": lock.token,
            "started_at": started,
            "status": "running",
        }
        self.echo(f"{shard_id}: attempt {attempt_dir.name} started ({shard['records']} records, {shard['bytes']} B)")
        child = _AttemptProcess(argv, log)
        record.update(command=child.command, child_pid=child.pid, forked=child.forked)
        write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
        limit = self.manifest["attempt_timeout"]
        timed_out = False
        try:
            with lock.heartbeat(self.timeout / 5):
                exit_code = child.wait(limit)
            if exit_code is None:
                child.kill()
                exit_code = child.wait()
                timed_out = True
        except KeyboardInterrupt:
            child.kill()
            child.wait()
            record.update(status="interrupted", finished_at=time.time())
            write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
            raise
        record.update(exit_code=exit_code, finished_at=time.time(), seconds=round(time.time() - started, 3))
        if timed_out:
            error = f"stopped after the attempt timeout of {limit:g} s; end of {log}:\n{_log_tail(log)}"
            record.update(status="failed", error=error)
        elif exit_code == 0:
            try:
                result = self.publish(shard, attempt_dir, output, started)
                record.update(status="succeeded", **result)
            except (OSError, ValueError) as exc:
                record.update(status="failed", error=f"collecting the output failed: {type(exc).__name__}: {exc}")
        else:
            record.update(status="failed", error=f"exit code {exit_code}; end of {log}:\n{_log_tail(log)}")
        write_local_atomically(attempt_dir / ATTEMPT_FILE, orjson.dumps(record))
        return record

    def publish(
        self, shard: dict[str, Any], attempt_dir: pathlib.Path, output: pathlib.Path, started: float
    ) -> dict[str, Any]:
        # The run's flow says where it put its documents and stats (the fineweb pipeline's --dump moves them).
        argv = [*self.manifest["pipeline"]["args"], "--input_ranges", str(attempt_dir / _INPUTS_FILE)]
        flow = self.spec.flow(parse(self.spec, [*argv, "--output", str(output)]))
        target = attempt_dir / SHARD_DOCUMENTS
        fields, sort_runs = collect_documents(flow.sink.documents_dir, target, self.sort_memory)
        stats = pathlib.Path(join(flow.output, STATS_FILE))
        done = {
            "shard": shard["id"],
            "attempt": str(attempt_dir.relative_to(self.job.path)),
            "host": self.host,
            "pid": os.getpid(),
            "output": str(target.relative_to(self.job.path)),
            **fields,
            "stats": str(stats.relative_to(self.job.path)) if stats.exists() else None,
            "records_read": _records_read(stats, flow.read_label),
            "input_sha256": shard["sha256"],
            "seconds": round(time.time() - started, 3),
            "finished_at": time.time(),
        }
        if publish_once(self.job.done_path(shard["id"]), done):
            progress = job_progress(shard_states(self.job.path))
            self.echo(f"{shard['id']}: done, {fields['records']} documents in {done['seconds']:.1f} s · {progress}")
            return {"done": True, **fields, "sort_runs": sort_runs}
        self.echo(f"{shard['id']}: finished, but another attempt's done record came first; that one counts")
        return {"done": False, **fields, "sort_runs": sort_runs}

    def fail(self, shard_id: str, attempts: int, error: str) -> None:
        record = {"shard": shard_id, "attempts": attempts, "host": self.host, "at": time.time(), "error": error}
        if publish_once(self.job.failed_path(shard_id), record):
            self.echo(
                f"{shard_id}: failed after {attempts} attempts; see its attempts directory, fix the cause, then "
                f"`beamtrove elastic retry --job-dir {self.job.path} --shard-id {shard_id}`"
            )


def run_worker(
    job_dir: str | os.PathLike,
    *,
    max_shards: int | None = None,
    host: str | None = None,
    poll_interval: float | None = None,
    sort_memory: int = DEFAULT_SORT_MEMORY,
    echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> int:
    """Claims and processes shards until none is left; returns the exit status.

    A worker waits while the shards left are running elsewhere, since their
    workers may die and leave them to be taken over.

    Args:
        job_dir: A prepared job directory.
        max_shards: Stop after processing this many shards.
        host: The host name recorded in locks and done records (default: this
            machine's).
        poll_interval: Seconds between looks for claimable shards when all are
            running elsewhere (default: a fifth of the lock timeout, at most 10).
        sort_memory: About how many bytes of documents to hold while sorting a
            shard's output by id (at least 64 KiB); a larger shard is sorted in
            runs spilled to its attempt directory, then merged. The merge's
            read buffers and parsing one document at a time come on top. Each
            attempt's record says how many runs it spilled (``sort_runs``).
        echo: Where progress lines go.

    Returns:
        0 when every shard is done (or ``max_shards`` were processed), 2 when a
        shard has failed for good or is damaged (its output, or its done or
        failure record): no worker takes those, and each is named with the
        command that redoes it; 128 + the signal's number when SIGTERM or
        Ctrl-C stopped the worker (143, 130), which frees its shard at once.

    Raises:
        ElasticError: ``sort_memory`` is too small, the manifest is damaged or
            from another version, or the input or a file the options name
            changed since prepare.
    """
    if sort_memory < _MIN_SORT_MEMORY:
        raise ElasticError(
            f"--sort-memory {sort_memory} is too small: give at least {_MIN_SORT_MEMORY} bytes (64 KiB); "
            f"the default is {DEFAULT_SORT_MEMORY} (256 MiB)."
        )
    job = JobDir(job_dir)
    if is_staged(job.manifest()):
        # Imported here: staged jobs build on this package's job directory.
        from beamtrove.execution.staged.worker import run_staged_worker  # noqa: PLC0415

        return run_staged_worker(job.path, host=host, echo=echo, poll_interval=poll_interval, max_tasks=max_shards)
    worker = _Worker(job, host or socket.gethostname(), echo, sort_memory)
    check_unchanged(worker.manifest)
    poll = poll_interval if poll_interval is not None else min(worker.timeout / 5, 10.0)
    processed = 0
    # SIGTERM (what Slurm sends at a time limit or on preemption) stops the worker as Ctrl-C does.
    with stops_interrupt() as received:
        try:
            while max_shards is None or processed < max_shards:
                shards = worker.open_shards()
                if not shards:
                    break
                claim = worker.claim(shards)
                if claim is None:
                    time.sleep(poll)
                    continue
                shard, lock = claim
                try:
                    worker.process(shard, lock)
                finally:
                    lock.release()
                processed += 1
        except KeyboardInterrupt:
            signal_name, status = stopped_by(received)
            echo(f"stopped by {signal_name}; the interrupted shard is free for other workers")
            return status
    # Shards no worker will take: a user must look at them, so the job's workers say so rather than "finished".
    states = shard_states(job.path)
    for entry in states:
        if entry["state"] == "damaged":
            echo(
                entry.get("message")
                or f"{entry['id']}: output {entry['damage']} ({entry['output']}): `beamtrove elastic retry --job-dir "
                f"{job.path} --shard-id {entry['id']}` runs it again"
            )
    failed = [entry["id"] for entry in states if entry["state"] == "failed"]
    if failed:
        echo(f"{len(failed)} shard(s) failed for good: {', '.join(failed)}")
    if failed or any(entry["state"] == "damaged" for entry in states):
        return 2
    echo(f"worker {worker.host}:{os.getpid()} finished after processing {processed} shard(s)")
    return 0


def slurm_array_script() -> str:
    """The Slurm array script that runs one worker per array task, with how to use it in its comments."""
    return importlib.resources.files(__package__).joinpath("array.sbatch").read_text(encoding="utf-8")
