"""Wall time, CPU and memory of a command's whole process tree, for the comparison benchmarks."""

from __future__ import annotations

import collections
import os
import pathlib
import subprocess
import threading
import time

__all__ = ["TreeMonitor", "command_failed", "run_measured"]

SAMPLE_SECONDS = 0.2


class TreeMonitor:
    """Samples a process tree until stopped: peak summed PSS and RSS, and the CPU the rest of the machine used.

    Attributes:
        peak_pss: Highest summed PSS of the process and its descendants, bytes.
        peak_rss: Highest summed RSS, bytes (counts shared pages once per process).
        peak_process_pss: Highest PSS of any single process of the tree, bytes:
            the memory one worker needs.
        peak_by_command: Highest PSS of any single process, per command name
            (``/proc/<pid>/comm``): a Python worker apart from a runner's own process.
        other_cores: Mean CPU cores busy outside the tree: other work on the
            machine slows the run and makes extraction time out.
    """

    def __init__(self, root: int):
        self.root = root
        self.peak_pss = self.peak_rss = self.peak_process_pss = 0
        self.peak_by_command: dict[str, int] = {}
        self.other_cores = 0.0
        self._tree_ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeMonitor:
        self._start = (time.perf_counter(), _busy_ticks())
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        wall = time.perf_counter() - self._start[0]
        busy = _busy_ticks() - self._start[1]
        # Ticks of processes that ended between samples are missed, so this errs high.
        self.other_cores = max(0, busy - sum(self._tree_ticks.values())) / _TICKS / max(wall, 1e-9)

    def _tree(self) -> list[int]:
        # Scanning /proc catches workers however they were started (fork, forkserver, Popen).
        children = collections.defaultdict(list)
        ticks = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    # The command name may hold spaces and parentheses: fields restart after the last ")".
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(entry.name)
            children[int(fields[1])].append(pid)
            ticks[pid] = int(fields[11]) + int(fields[12])
        tree, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, ()))
            if pid in ticks:
                self._tree_ticks[pid] = ticks[pid]
        return tree

    @staticmethod
    def _memory(pid: int) -> tuple[int, int]:
        pss = rss = 0
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        pss = int(line.split()[1]) * 1024
                    elif line.startswith("Rss:"):
                        rss = int(line.split()[1]) * 1024
        except OSError:
            pass  # the process ended between listing and reading
        return pss, rss

    def _sample(self) -> None:
        while not self._stop.is_set():
            tree = self._tree()
            sizes = [self._memory(pid) for pid in tree]
            for pid, (pss, _) in zip(tree, sizes, strict=True):
                command = _command(pid)
                self.peak_by_command[command] = max(self.peak_by_command.get(command, 0), pss)
            self.peak_pss = max(self.peak_pss, sum(pss for pss, _ in sizes))
            self.peak_rss = max(self.peak_rss, sum(rss for _, rss in sizes))
            self.peak_process_pss = max(self.peak_process_pss, *(pss for pss, _ in sizes), 0)
            self._stop.wait(SAMPLE_SECONDS)


_TICKS = os.sysconf("SC_CLK_TCK")


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return "?"


def _busy_ticks() -> int:
    """CPU ticks the whole machine spent busy since boot (all but idle and iowait)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:9]]
    return sum(values) - values[3] - values[4]


def run_measured(command: list[str], log: pathlib.Path) -> tuple[float, TreeMonitor]:
    """Runs ``command`` with its output in ``log``: ``(wall seconds, its monitor)``.

    Raises:
        RuntimeError: The command failed.
    """
    with log.open("w") as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        with TreeMonitor(process.pid) as monitor:
            code = process.wait()
        wall = time.perf_counter() - start
    if code:
        raise command_failed(command[0], code, log)
    return wall, monitor


def command_failed(name: str, code: int, log: pathlib.Path) -> RuntimeError:
    """The error for a command that exited with ``code``, quoting the end of its output ``log``."""
    tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
    return RuntimeError(f"{name} ... exited with {code}; end of {log}:\n{tail}")
