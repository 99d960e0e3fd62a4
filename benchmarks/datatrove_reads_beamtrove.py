"""Does DataTrove 0.10.1 read beamtrove's JSONL and Parquet files unchanged?

Reads every real WARC file in ../shared/data/warc with beamtrove, writes the
documents with WriteJsonl and WriteParquet, then loads both outputs with
DataTrove's JsonlReader and ParquetReader (in DataTrove's own venv) and
compares each document's id, text and metadata with what beamtrove read.
DataTrove's readers set ``metadata["file_path"]`` to the file they read, so that
key is left out of the comparison. In Parquet, metadata is one struct column,
so a key that some documents lack reads back as null in those documents (as it
does from DataTrove's own ParquetWriter); for Parquet, null values count as
absent keys.

Usage:
    python -m benchmarks.datatrove_reads_beamtrove [--datatrove_venv PATH] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import json
import pathlib
import sys
import tempfile

import apache_beam as beam

from beamtrove.transforms.readers import ReadWarc
from beamtrove.transforms.writers import WriteJsonl, WriteParquet
from benchmarks.common import (
    WARC_DIR,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    document_digest,
    json_output,
    verdict,
)

_DATATROVE_SCRIPT = """
import hashlib, json, sys
from datatrove.pipeline.readers import JsonlReader, ParquetReader
readers = {"jsonl": JsonlReader(sys.argv[1]), "parquet": ParquetReader(sys.argv[2])}
out = {}
for name, reader in readers.items():
    out[name] = [
        [d.id, hashlib.sha256(d.text.encode("utf-8", "surrogatepass")).hexdigest(),
         {k: v for k, v in d.metadata.items() if k != "file_path"}]
        for d in reader.run(None, rank=0, world_size=1)
    ]
json.dump(out, sys.stdout)
"""


def main() -> None:
    parser = argument_parser(__doc__)
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-datatrove-reads-beamtrove")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    if not WARC_DIR.exists():
        sys.exit(f"{WARC_DIR} is absent: keep ../shared beside the checkout")
    python = datatrove_python(args.datatrove_venv)

    with tempfile.TemporaryDirectory(prefix="beamtrove-compat-") as scratch:
        jsonl_dir, parquet_dir, ours_file = (pathlib.Path(scratch) / n for n in ("jsonl", "parquet", "ours.jsonl"))
        with beam.Pipeline() as pipeline:
            docs = pipeline | ReadWarc(str(WARC_DIR))
            docs | "Jsonl" >> WriteJsonl(str(jsonl_dir))
            docs | "Parquet" >> WriteParquet(str(parquet_dir))
            _ = (
                docs
                | beam.Map(lambda d: json.dumps(document_digest(d.id, d.text, d.metadata, without=["file_path"])))
                | beam.io.WriteToText(str(ours_file), shard_name_template="")
            )
        ours = sorted(json.loads(line) for line in ours_file.read_text().splitlines())
        theirs = json_output([python, "-c", _DATATROVE_SCRIPT, jsonl_dir, parquet_dir])

    rows, failed = [], False
    for name in ("jsonl", "parquet"):
        read = sorted(theirs[name])
        if name == "parquet":
            read = [[i, t, {k: v for k, v in m.items() if v is not None}] for i, t, m in read]
        same = sum(a == b for a, b in zip(ours, read, strict=False))
        print(f"DataTrove {name} reader: {len(read)} documents read, {same}/{len(ours)} identical to beamtrove's")
        passed = results.check(
            f"DataTrove's {name} reader reads every document as beamtrove wrote it", len(read) == len(ours) == same
        )
        rows.append([name, len(ours), len(read), same, verdict(passed)])
        failed |= not passed
    results.table(
        "DataTrove's readers on beamtrove's files", ["format", "written", "read", "identical", "all identical"], rows
    )
    results.write()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
