"""Staged dataset files: write and read throughput of beamtrove's record format against pickle, on a real job's records.

A make_warc.py set is extracted with resiliparse and split into 4 JSONL files
(as ``benchmarks.staged_dedup`` does); an elastic staged job of ``dedup
--dedup STEPS --cluster_map`` runs on it with one worker, and every record of
every dataset file it made is read back. Those records are then written and
read again, dataset by dataset, in two formats, back to back, ``--repeat``
times each (the best time counts):

* ``pickle``: the files of beamtrove 0.15.0's first staged runs, as its
  ``records.py`` wrote and read them (copied here): frames of a 4-byte length
  and ``pickle.dumps(record, protocol=5)``, each written to a buffered file
  and hashed, then ``fsync``; read frame by frame and unpickled;
* ``beamtrove``: the files of :mod:`beamtrove.execution.jobs.staged.datasets`, by
  its own writer (with its ``fsync`` and summary) and ``read_records``: frames
  of a 4-byte length and the record's byte form, no pickles.

The table gives, per dataset and format, the bytes of the files and the best
write and read times; the note gives the throughput over the records' pickled
size (the same yardstick for both).

Usage:
    python -m benchmarks.staged_records [--records 12000] [--steps exact,url,minhash,sentence] [--partitions 4]
        [--repeat 3] [--reuse_job] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import pickle
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

# The writer of a dataset file is private to the module: its DoFn is what the tasks run.
from beamtrove.execution.jobs.staged.datasets import _RecordFile, decode_record, encode_record, read_records
from benchmarks.common import MIB, Results, add_workdir_arguments, argument_parser
from benchmarks.dedup_inputs import split_documents

_LENGTH = struct.Struct("<I")
_BUFFER = 1 << 20


def job_records(
    source: pathlib.Path, workdir: pathlib.Path, steps: str, partitions: int, reuse: bool
) -> dict[str, list]:
    """Every record of the dataset files of an elastic staged dedup job over ``source``, by dataset."""
    job = workdir / "staged-records-job"
    if not (reuse and (job / "manifest.json").exists()):
        shutil.rmtree(job, ignore_errors=True)
        _run_job(source, job, steps, partitions)
    datasets: dict[str, list] = {}
    for path in sorted(job.glob("attempts/*/*/data/**/*.rec")):
        # attempts/<task>/<attempt>/data/<dataset>/<partition>/<file>
        dataset = "/".join(path.relative_to(job / "attempts").parts[3:-2])
        datasets.setdefault(dataset, []).extend(read_records(path))
    return datasets


def _run_job(source: pathlib.Path, job: pathlib.Path, steps: str, partitions: int) -> None:
    prepare = ["beamtrove", "elastic", "prepare", "--pipeline", "dedup", "--input", str(source / "*.jsonl.gz")]
    prepare += ["--job-dir", str(job), "--num-shards", str(partitions), "--", "--dedup", steps, "--cluster_map"]
    subprocess.run(prepare, check=True, stdout=subprocess.DEVNULL)
    with open(job.parent / "staged-records-worker.log", "w") as log:
        command = ["beamtrove", "elastic", "worker", "--job-dir", str(job)]
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)


def write_pickles(path: pathlib.Path, records: list) -> None:
    """Writes ``records`` as 0.15.0's first staged runs did."""
    digest = hashlib.sha256()
    with open(path, "wb", buffering=_BUFFER) as out:
        for record in records:
            data = pickle.dumps(record, protocol=5)
            frame = _LENGTH.pack(len(data)) + data
            out.write(frame)
            digest.update(frame)
        out.flush()
        os.fsync(out.fileno())


def read_pickles(path: pathlib.Path) -> Iterator[Any]:
    """Reads a file of :func:`write_pickles` as 0.15.0's first staged runs did."""
    with open(path, "rb", buffering=_BUFFER) as source:
        while header := source.read(_LENGTH.size):
            yield pickle.loads(source.read(_LENGTH.unpack(header)[0]))


def write_records(path: pathlib.Path, records: list) -> None:
    """Writes ``records`` as a staged task does."""
    file = _RecordFile(path)
    for record in records:
        file.write(record)
    file.close()


_FORMATS: dict[str, tuple[Callable[[pathlib.Path, list], None], Callable[[pathlib.Path], Iterator[Any]]]] = {
    "pickle": (write_pickles, read_pickles),
    "beamtrove": (write_records, read_records),
}


def measure(records: list, folder: pathlib.Path, name: str, repeat: int) -> tuple[int, float, float]:
    """Bytes, best write seconds and best read seconds of ``records`` in format ``name``."""
    write, read = _FORMATS[name]
    path = folder / f"{name}.rec"
    best_write = best_read = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        write(path, records)
        best_write = min(best_write, time.perf_counter() - started)
        started = time.perf_counter()
        count = sum(1 for _ in read(path))
        best_read = min(best_read, time.perf_counter() - started)
        assert count == len(records)
    size = path.stat().st_size
    for written in folder.iterdir():
        written.unlink()
    return size, best_write, best_read


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, default=12_000, help="make_warc.py records (default: %(default)s)")
    parser.add_argument("--steps", default="exact,url,minhash,sentence")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reuse_job", action="store_true", help="read the job an earlier run of this version made")
    add_workdir_arguments(parser, "beamtrove-staged-records")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    source = split_documents(args.workdir, records=args.records, files=16, extractor="resiliparse")
    datasets = job_records(source, args.workdir, args.steps, args.partitions, args.reuse_job)
    folder = args.workdir / "formats"
    folder.mkdir(exist_ok=True)
    for dataset, records in datasets.items():
        # Every record reads back as what was written, in both formats (compared by beamtrove's byte form, which
        # tells apart what == does not: types, dict orders, array dtypes).
        for record in records:
            expected = encode_record(record)
            assert encode_record(decode_record(expected)) == expected, dataset
            assert encode_record(pickle.loads(pickle.dumps(record, protocol=5))) == expected, dataset
    rows, totals = [], {name: [0, 0.0, 0.0] for name in _FORMATS}
    for dataset, records in datasets.items():
        yardstick = sum(len(pickle.dumps(record, protocol=5)) for record in records)
        row = [dataset, len(records)]
        for name in _FORMATS:
            size, write_seconds, read_seconds = measure(records, folder, name, args.repeat)
            for index, value in enumerate((size, write_seconds, read_seconds)):
                totals[name][index] += value
            row += [f"{size / MIB:.2f}", f"{write_seconds:.3f}", f"{read_seconds:.3f}"]
        rows.append(row)
        print(" ".join(str(cell) for cell in row), flush=True)
        totals.setdefault("yardstick", [0])[0] += yardstick
    yardstick = totals.pop("yardstick")[0] / MIB
    rows.append(
        ["all", sum(len(records) for records in datasets.values())]
        + [
            cell
            for name in _FORMATS
            for cell in (f"{totals[name][0] / MIB:.2f}", *(f"{s:.3f}" for s in totals[name][1:]))
        ]
    )
    columns = ["dataset", "records"]
    columns += [f"{name} {what}" for name in _FORMATS for what in ("MiB", "write s", "read s")]
    print(results.table(f"--dedup {args.steps} --cluster_map, {args.partitions} partitions", columns, rows))
    (old_size, old_write, old_read), (new_size, new_write, new_read) = totals["pickle"], totals["beamtrove"]
    print(
        results.note(
            f"{yardstick:.1f} MiB of records (pickled): pickle writes {yardstick / old_write:.0f} MiB/s and reads "
            f"{yardstick / old_read:.0f} MiB/s; beamtrove's format writes {yardstick / new_write:.0f} MiB/s "
            f"({old_write / new_write:.2f}x pickle's speed) and reads {yardstick / new_read:.0f} MiB/s "
            f"({old_read / new_read:.2f}x); its files are {new_size / old_size:.2f}x pickle's size"
        )
    )
    results.check(
        "beamtrove's format writes and reads at least half as fast as pickle",
        (old_write + old_read) / (new_write + new_read) >= 0.5,
    )
    results.write()


if __name__ == "__main__":
    sys.exit(main())
