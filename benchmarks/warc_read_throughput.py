"""WARC source throughput against a plain warcio loop over the same files.

Builds a WARC set from the real pages in ../shared/data with make_warc.py
(or reads --input), then times, in the same run:

* the limit: a plain warcio loop that iterates every record and reads every
  response payload (stock warcio, zlib);
* the same loop with ISA-L inflating the gzip members, as beamtrove's reader
  does (the limit of that approach);
* beamtrove's ReadWarc on the DirectRunner (in_memory, one worker) and in
  multi_processing mode with --workers workers, counting the documents. This
  includes pipeline start-up, charset detection and decoding to text.

Usage:
    python benchmarks/warc_read_throughput.py [--records 10000] [--files 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import glob
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import zlib

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BUFF_SIZE, DecompressingBufferedReader

from beamtrove.stats import collect_stats
from beamtrove.transforms.readers import ReadWarc

MAKE_WARC = pathlib.Path(__file__).resolve().parents[2] / "shared" / "tools" / "make_warc.py"


def warcio_loop(files: list[str], inflate=None) -> int:
    """Iterates all records and reads every response payload; returns the response count."""
    responses = 0
    for path in files:
        with open(path, "rb") as stream:
            records = ArchiveIterator(stream)
            if inflate is not None:

                class Reader(DecompressingBufferedReader):
                    DECOMPRESSORS = {**DecompressingBufferedReader.DECOMPRESSORS, "gzip": inflate}  # noqa: RUF012

                records.reader = Reader(records.fh, block_size=BUFF_SIZE)
            for record in records:
                if record.rec_type == "response":
                    record.content_stream().read()
                    responses += 1
    return responses


def beamtrove_read(pattern: str, beam_args: list[str]) -> int:
    """Reads every document into nothing; returns the step's ``out`` counter."""
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    _ = pipeline | "Read" >> ReadWarc(pattern, progress_interval=0)
    result = pipeline.run()
    result.wait_until_finish()
    return collect_stats(result)["Read"]["counters"]["out"]


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", help="directory of .warc.gz files (default: build one with make_warc.py)")
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.input is None and not MAKE_WARC.exists():
        sys.exit(f"{MAKE_WARC} is absent: pass --input DIR or keep ../shared beside the checkout")

    with tempfile.TemporaryDirectory(prefix="beamtrove-bench-") as scratch:
        directory = args.input
        if directory is None:
            directory = scratch
            size = ["--records", str(args.records), "--files", str(args.files), "--seed", str(args.seed)]
            subprocess.run(
                [sys.executable, str(MAKE_WARC), directory, *size],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        pattern = os.path.join(directory, "*.warc.gz")
        files = sorted(glob.glob(pattern))
        size_mb = sum(os.path.getsize(f) for f in files) / 1e6
        print(f"input: {len(files)} files, {size_mb:.1f} MB compressed, {os.cpu_count()} cores")

        def inflate_zlib():
            return zlib.decompressobj(16 + zlib.MAX_WBITS)

        def inflate_isal():
            return isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS)

        runs = [
            ("warcio loop (zlib): the limit", timed(warcio_loop, files, inflate_zlib)),
            ("warcio loop (ISA-L)", timed(warcio_loop, files, inflate_isal)),
            ("beamtrove ReadWarc, in_memory, 1 worker", timed(beamtrove_read, pattern, [])),
            (
                f"beamtrove ReadWarc, multi_processing, {args.workers} workers",
                timed(
                    beamtrove_read,
                    pattern,
                    ["--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"],
                ),
            ),
        ]
        limit_records, limit_seconds = runs[0][1]
        print(f"{'run':<52} {'records':>8} {'seconds':>8} {'records/s':>10} {'MB/s':>7} {'ratio':>6}")
        for name, (records, seconds) in runs:
            print(
                f"{name:<52} {records:>8} {seconds:>8.2f} {records / seconds:>10.0f} {size_mb / seconds:>7.1f}"
                f" {limit_seconds / seconds:>6.2f}"
            )
        if any(records != limit_records for _, (records, _) in runs):
            sys.exit("record counts differ between runs")


if __name__ == "__main__":
    main()
