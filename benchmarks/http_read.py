"""Reading a WARC set over HTTP against reading it from local disk: speed, memory, and faults retried.

Issue 45's goal: a >= 500 MB WARC set read over local HTTP at >= 0.8x the
local-disk rate with flat memory, and with 10 % injected faults at >= 0.6x.

Builds a WARC set from the real pages in ../shared/data with make_warc.py
(20,000 records in 50 files, about 570 MB compressed, unless told otherwise;
once per work directory: 50 files of 11 MB rather than 20 of 28 MB so that
10 % of the files is 5 faults per read, not 2) and lays it out like Common
Crawl under ``<workdir>/cc-<set>/`` (``crawl-data/CC-MAIN-BENCH/warc.paths.gz``
and segment folders, tests/cc_server.py's ``lay_out_common_crawl``). Then,
for ``--rounds`` rounds, one read after the other:

* local: beamtrove's record reader (``RecordReader(WarcParser()).read``,
  the loop ReadWarc runs in each worker) over the laid-out files on local
  disk, the file list read from the local ``warc.paths.gz`` by ``DumpFiles``
  (the files are in the page cache after the first read: the rate is the
  reader's, not the disk's, which makes the goal harder, not easier);
* http: the same over ``http://127.0.0.1:PORT`` from tests/cc_server.py's
  server (a real HTTP/1.1 server process, Range honoured), no faults: what
  ``beamtrove run fineweb --dump CC-MAIN-BENCH --cc_base URL`` reads;
* http + faults: the same with the first GET of ``--fault_rate`` (10 %) of
  the WARC files faulted: 5 of the 55 GETs of 50 files, the files drawn
  with ``--fault_seed`` and the round. The faults take the server's kinds
  in turn (http_429, http_500, http_502, http_503, http_503_no_retry_after,
  http_504, reset, short_body, trickle), the next round going on where the
  last stopped, so that two rounds inject every kind; a probability per GET
  would draw 5 or 6 faults from 9 kinds, often missing the costliest
  (trickle). reset and short_body cut the body halfway, trickle after 16
  bytes; the HTTP errors come before the body.

Each read runs in a fresh process (spawned, so that its peak RSS is its own)
that times only the reading, counts documents and dead letters, hashes the
ids and the texts in order (the hashing timed apart and taken out of the
seconds and the reader's CPU), keeps the read step's counters
(``retries.<fault>``) and samples its RSS after each file; the peak is
``ru_maxrss``. Every read
must give the local read's documents; the faulted read must have retried as
many times as the server's log shows faulted GETs, and lost nothing. Ratios
are per round (each HTTP read against the local read of its round) and
judged by their median. The server runs on the same 2 cores as the reader:
its CPU seconds are shown beside the reader's, and so are the cores the rest
of the machine kept busy during each read (other work slows a read as much
as anything measured here).

The waits are scaled down so that a fault costs what a real retry costs in
kind but not minutes: the server asks 429s and 503s to come back after
``--retry_after`` (1 s, the least a real server asks: each costs 1 s), the
reader retries with ``RetryPolicy(first_wait=--retry_wait,
read_timeout=--read_timeout)`` (0.05 s and 2 s, where a run's defaults are 1 s
and 60 s), so the other HTTP errors cost a backoff of 25-50 ms, and a
trickle stalls for ``--read_timeout + 1`` s, so that it costs one read
timeout (2 s); a reset or a short body costs a new connection and a ranged
GET from the byte reached.

Usage:
    python -m benchmarks.http_read [--records 20000] [--files 50] [--rounds 2] [--fault_rate 0.1]
        [--fault_seed 45] [--retry_after 1] [--read_timeout 2] [--retry_wait 0.05] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import gzip
import hashlib
import multiprocessing
import os
import pathlib
import random
import resource
import shutil
import statistics
import sys
import time

from beamtrove.commoncrawl import DumpFiles
from beamtrove.document import Document
from beamtrove.formats.records import RecordReader
from beamtrove.formats.warc import WarcParser
from beamtrove.network import RetryPolicy
from benchmarks.common import (
    MIB,
    Results,
    TreeMonitor,
    add_warc_set_arguments,
    argument_parser,
    verdict,
    warc_set_of,
)
from tests.cc_server import FAULTS, CCServer, lay_out_common_crawl

DUMP = "CC-MAIN-BENCH"
_STEP = "read"
_PAGE = os.sysconf("SC_PAGE_SIZE")
# The goals of issue 45, as multiples of the local read's rate; memory: the HTTP reads' peak RSS against the local's.
HTTP_GOAL = 0.8
FAULTS_GOAL = 0.6
MEMORY_GOAL = 1.1


class StepCounts:
    """The read step's counters, as a run keeps them (see ``beamtrove.formats.records.Counts``)."""

    def __init__(self):
        self.counters: collections.Counter[str] = collections.Counter()

    def received(self, count: int = 1) -> None:
        self.counters["in"] += count

    def emitted(self, count: int = 1) -> None:
        self.counters["out"] += count

    def skipped(self, reason: str) -> None:
        self.counters[f"skipped.{reason}"] += 1

    def errored(self, reason: str) -> None:
        self.counters[f"errors.{reason}"] += 1

    def observe(self, name: str, value: int) -> None:
        pass

    def inc(self, name: str, value: int = 1) -> None:
        self.counters[name] += value


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


def _cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process (this one when None), all its threads."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_all(base: str, policy: RetryPolicy) -> dict:
    """Reads the dump under ``base`` (a folder or a URL) as a run's read step does; what it gave and cost.

    Runs in a process of its own: the peak RSS is this read's.
    """
    files = DumpFiles(DUMP, base=base).list_files()
    reader = RecordReader(WarcParser(), progress_interval=0, retries=policy)
    counts = StepCounts()
    ids, texts = hashlib.sha256(), hashlib.sha256()
    documents = 0
    dead_letters: collections.Counter[str] = collections.Counter()
    rss_after_file = []
    # The check's hashing is timed apart and taken out: it is no part of reading, and would weigh as much again
    # as the reader's own work on a fast read.
    checking = 0.0
    cpu, start = _cpu_seconds(), time.perf_counter()
    for file in files:
        for outcome in reader.read_file(file, _STEP, counts):
            hashing = time.perf_counter()
            if isinstance(outcome, Document):
                documents += 1
                ids.update(outcome.id.encode() + b"\0")
                texts.update(outcome.text.encode("utf-8", "surrogatepass") + b"\0")
            else:
                dead_letters[outcome.reason] += 1
            checking += time.perf_counter() - hashing
        rss_after_file.append(_rss())
    seconds = time.perf_counter() - start - checking
    return {
        "files": len(files),
        "documents": documents,
        "dead_letters": dict(dead_letters),
        "ids": ids.hexdigest(),
        "texts": texts.hexdigest(),
        "seconds": seconds,
        "cpu": _cpu_seconds() - cpu - checking,
        "retries": {name: value for name, value in counts.counters.items() if name.startswith("retries.")},
        "rss_after_file": rss_after_file,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def read_in_own_process(base: str, policy: RetryPolicy) -> dict:
    """:func:`read_all` in a fresh spawned process; adds the cores the rest of the machine kept busy meanwhile."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        pool.submit(int).result()  # the process started and its imports done before the machine is watched
        with TreeMonitor(os.getpid()) as monitor:
            read = pool.submit(read_all, base, policy).result()
    read["other_cores"] = monitor.other_cores
    return read


def laid_out(workdir: pathlib.Path, warc_dir: pathlib.Path) -> pathlib.Path:
    """The WARC set laid out like Common Crawl under ``<workdir>/cc-<set>`` (once)."""
    root = workdir / f"cc-{warc_dir.name}"
    if not (root / "crawl-data" / DUMP / "warc.paths.gz").exists():
        shutil.rmtree(root, ignore_errors=True)
        print(f"laying out {root}", file=sys.stderr)
        lay_out_common_crawl(warc_dir, root, DUMP)
    return root


def _server_gets(server: CCServer, after: int) -> tuple[int, collections.Counter[str]]:
    """The GETs of WARC files the server logged after its first ``after`` lines, and their faults by kind."""
    gets = [entry for entry in server.records()[after:] if entry["method"] == "GET" and ".warc." in entry["path"]]
    return len(gets), collections.Counter(entry["fault"] for entry in gets if entry["fault"])


def fault_schedule(paths: list[str], args: argparse.Namespace, round_number: int) -> dict:
    """The server's schedule for one round: the first GET of ``rate`` of ``paths`` faulted, the kinds in turn."""
    count = max(1, round(args.fault_rate * len(paths)))
    faulted = sorted(random.Random(f"{args.fault_seed}|{round_number}").sample(paths, count))
    kinds = sorted(FAULTS)
    first = (round_number - 1) * count
    return {
        "retry_after": args.retry_after,
        "trickle_seconds": args.read_timeout + 1,
        "rules": [
            {"path": path, "requests": [1], "fault": kinds[(first + number) % len(kinds)]}
            for number, path in enumerate(faulted)
        ],
    }


def read_over_http(root: pathlib.Path, log: pathlib.Path, schedule: dict | None, policy: RetryPolicy) -> dict:
    """:func:`read_in_own_process` from a server of ``root``; adds the server's CPU seconds and its GETs."""
    with CCServer.start(root, log, schedule=schedule) as server:
        logged = len(server.records())
        server_cpu = _cpu_seconds(server.process.pid)
        read = read_in_own_process(server.url, policy)
        read["server_cpu"] = _cpu_seconds(server.process.pid) - server_cpu
        read["gets"], read["faults"] = _server_gets(server, logged)
    return read


def main() -> None:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=20_000, files=50, workdir_name="beamtrove-http-read")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three reads (default: %(default)s)")
    parser.add_argument(
        "--fault_rate", type=float, default=0.1, help="share of the files whose first GET fails (default: %(default)s)"
    )
    parser.add_argument("--fault_seed", type=int, default=45, help="draws the faulted files (default: %(default)s)")
    parser.add_argument(
        "--read_timeout", type=float, default=2.0, help="the reader's read timeout, s (default: %(default)s)"
    )
    parser.add_argument(
        "--retry_after", type=int, default=1, help="the server's Retry-After on 429 and 503, s (default: %(default)s)"
    )
    parser.add_argument(
        "--retry_wait", type=float, default=0.05, help="the reader's first backoff, s (default: %(default)s)"
    )
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    workdir, warc_dir = warc_set_of(args)
    root = laid_out(workdir, warc_dir)
    stored = sorted((root / "crawl-data" / DUMP / "segments").glob("*/warc/*.warc.gz"))
    size_mb = sum(path.stat().st_size for path in stored) / 1e6
    print(results.note(f"input: {len(stored)} WARC files, {size_mb:.1f} MB compressed, {os.cpu_count()} cores"))

    policy = RetryPolicy(first_wait=args.retry_wait, read_timeout=args.read_timeout)
    with gzip.open(root / "crawl-data" / DUMP / "warc.paths.gz", "rt") as listing:
        paths = listing.read().split()
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    names = ("local disk", "http", f"http, {args.fault_rate:.0%} of files faulted")
    rounds = []
    for number in range(1, args.rounds + 1):
        print(f"round {number}: local", file=sys.stderr)
        local = read_in_own_process(str(root), policy)
        local["server_cpu"], local["gets"], local["faults"] = None, None, collections.Counter()
        print(f"round {number}: http", file=sys.stderr)
        plain = read_over_http(root, logs / f"server-r{number}-http.jsonl", None, policy)
        print(f"round {number}: http with faults", file=sys.stderr)
        schedule = fault_schedule(paths, args, number)
        faulted = read_over_http(root, logs / f"server-r{number}-faults.jsonl", schedule, policy)
        rounds.append(dict(zip(names, (local, plain, faulted), strict=True)))

    rows = []
    for number, reads in enumerate(rounds, 1):
        local = reads[names[0]]
        for name, read in reads.items():
            retries = sum(read["retries"].values())
            faults = sum(read["faults"].values())
            rows.append(
                [
                    number,
                    name,
                    read["documents"],
                    f"{read['seconds']:.2f}",
                    f"{read['documents'] / read['seconds']:.0f}",
                    f"{size_mb / read['seconds']:.1f}",
                    f"{local['seconds'] / read['seconds']:.2f}x",
                    f"{read['cpu']:.1f}",
                    "" if read["server_cpu"] is None else f"{read['server_cpu']:.1f}",
                    f"{read['other_cores']:.2f}",
                    f"{read['rss_after_file'][0] / MIB:.0f}",
                    f"{read['peak_rss'] / MIB:.0f}",
                    f"{(read['peak_rss'] - read['rss_after_file'][0]) / MIB:.1f}",
                    "" if read["gets"] is None else f"{read['gets']} ({faults} faulted)",
                    retries,
                ]
            )
    columns = [
        "round",
        "read",
        "documents",
        "seconds",
        "docs/s",
        "MB/s",
        "ratio to local",
        "reader CPU s",
        "server CPU s",
        "other load, cores",
        "RSS after file 1, MiB",
        "peak RSS, MiB",
        "peak growth after file 1, MiB",
        "WARC GETs",
        "retries",
    ]
    print(results.table(f"Reading {len(stored)} WARC files, {size_mb:.1f} MB, in one process", columns, rows))

    for number, reads in enumerate(rounds, 1):
        faulted = reads[names[2]]
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(faulted["faults"].items())) or "none"
        retried = ", ".join(f"{kind} {count}" for kind, count in sorted(faulted["retries"].items())) or "none"
        print(results.note(f"round {number}: faults injected: {kinds}; retries counted: {retried}"))
    http_ratios = [reads[names[0]]["seconds"] / reads[names[1]]["seconds"] for reads in rounds]
    fault_ratios = [reads[names[0]]["seconds"] / reads[names[2]]["seconds"] for reads in rounds]
    http_ratio, fault_ratio = statistics.median(http_ratios), statistics.median(fault_ratios)
    print(results.note(f"http / local: {' / '.join(f'{r:.2f}' for r in http_ratios)}, median {http_ratio:.2f}x"))
    print(results.note(f"faulted / local: {' / '.join(f'{r:.2f}' for r in fault_ratios)}, median {fault_ratio:.2f}x"))

    reference = rounds[0][names[0]]
    same = all(
        (read["documents"], read["ids"], read["texts"], read["dead_letters"])
        == (reference["documents"], reference["ids"], reference["texts"], reference["dead_letters"])
        for reads in rounds
        for read in reads.values()
    )
    retried = all(
        sum(reads[names[2]]["faults"].values()) > 0
        and sum(reads[names[2]]["retries"].values()) == sum(reads[names[2]]["faults"].values())
        for reads in rounds
    )
    flat = all(
        reads[name]["peak_rss"] <= MEMORY_GOAL * reads[names[0]]["peak_rss"] for reads in rounds for name in names[1:]
    )
    checks = [
        ("every read gives the local read's documents (ids and texts, in order) and dead letters", same),
        ("the faulted reads retried every injected fault (read step's retries = faulted GETs in the log)", retried),
        (f"over HTTP at >= {HTTP_GOAL}x the local-disk rate (median of rounds)", http_ratio >= HTTP_GOAL),
        (
            f"with {args.fault_rate:.0%} of files faulted at >= {FAULTS_GOAL}x (median of rounds)",
            fault_ratio >= FAULTS_GOAL,
        ),
        (f"flat memory: every HTTP read's peak RSS <= {MEMORY_GOAL}x the local read's", flat),
    ]
    for goal, passed in checks:
        print(f"{verdict(results.check(goal, passed))}: {goal}")
    if reference["dead_letters"]:
        print(results.note(f"dead letters in every read: {reference['dead_letters']}"))
    results.write()
    if not results.passed:
        sys.exit(1)


if __name__ == "__main__":
    main()
