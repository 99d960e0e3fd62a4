"""WARC source throughput against a plain warcio loop over the same files.

Builds a WARC set from the real pages in ../shared/data with make_warc.py
(once per work directory; or reads --input), then times, in the same run:

* the limit: a plain warcio loop that iterates every record and reads every
  response payload (stock warcio, zlib);
* the same loop with ISA-L inflating the gzip members, as beamtrove's reader
  does (the limit of that approach);
* beamtrove's ReadWarc on the DirectRunner (in_memory, one worker) and in
  multi_processing mode with --workers workers, counting the documents. This
  includes pipeline start-up, charset detection and decoding to text.

Usage:
    python -m benchmarks.warc_read_throughput [--records 10000] [--files 8] [--workers 2] [--input DIR]
        [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import glob
import os
import pathlib
import sys
import time
import zlib

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import BUFF_SIZE, DecompressingBufferedReader

from beamtrove.metrics import collect_stats
from beamtrove.transforms.readers import ReadWarc
from benchmarks.common import Results, add_warc_set_arguments, argument_parser, warc_set_of

# The reader's label, which names its stats.
_READ = "read"


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
    _ = pipeline | _READ >> ReadWarc(pattern, progress_interval=0)
    result = pipeline.run()
    result.wait_until_finish()
    return collect_stats(result)[_READ]["counters"]["out"]


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--input", type=pathlib.Path, help="folder of .warc.gz files (default: a make_warc.py set)")
    add_warc_set_arguments(parser, records=10_000, files=8, workdir_name="beamtrove-warc-read-throughput")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    directory = args.input or warc_set_of(args)[1]
    pattern = os.path.join(directory, "*.warc.gz")
    files = sorted(glob.glob(pattern))
    size_mb = sum(os.path.getsize(f) for f in files) / 1e6
    print(results.note(f"input: {len(files)} files, {size_mb:.1f} MB compressed, {os.cpu_count()} cores"))

    def inflate_zlib():
        return zlib.decompressobj(16 + zlib.MAX_WBITS)

    def inflate_isal():
        return isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS)

    multi_processing = ["--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"]
    runs = [
        ("warcio loop (zlib): the limit", timed(warcio_loop, files, inflate_zlib)),
        ("warcio loop (ISA-L)", timed(warcio_loop, files, inflate_isal)),
        ("beamtrove ReadWarc, in_memory, 1 worker", timed(beamtrove_read, pattern, [])),
        (
            f"beamtrove ReadWarc, multi_processing, {args.workers} workers",
            timed(beamtrove_read, pattern, multi_processing),
        ),
    ]
    limit_records, limit_seconds = runs[0][1]
    rows = [
        [
            name,
            records,
            f"{seconds:.2f}",
            f"{records / seconds:.0f}",
            f"{size_mb / seconds:.1f}",
            f"{limit_seconds / seconds:.2f}",
        ]
        for name, (records, seconds) in runs
    ]
    columns = ["run", "records", "seconds", "records/s", "MB/s", "ratio to the limit"]
    print(results.table("Reading the same WARC files", columns, rows))
    same = results.check("every run reads the same records", all(records == limit_records for _, (records, _) in runs))
    results.write()
    if not same:
        sys.exit("record counts differ between runs")


if __name__ == "__main__":
    main()
