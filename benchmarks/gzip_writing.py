"""Compressing documents as the JSONL writer does: zlib (beamtrove's) against ISA-L (its former compressor).

Reads the rows of the ``.jsonl.gz`` files of ``--input`` (default: a
generated corpus of ``--documents`` documents of real English sentences,
:mod:`benchmarks.generated_corpus`, made once in the work directory) and
compresses them, on one core, with:

* beamtrove's JSONL format (:class:`beamtrove.transforms.writers.jsonl.JsonlFormat`),
  as a ``.jsonl.gz`` writer writes them;
* the same text through Python's gzip streams: zlib at level 1 (what the
  format uses), ISA-L (``isal.igzip``) at level 2 (what it used before) and
  level 1, written as the format writes it (a row's JSON, then its newline).

It prints each one's MB/s and size, and how many different files each stream
makes of three cuts of the same text (as written, rows cut in halves, all at
once). It checks what the format's move to zlib was for: its file is zlib's
stream of the text, the same bytes from every cut.

Usage:
    python -m benchmarks.gzip_writing [--input DIR] [--documents 20000] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import gzip
import hashlib
import io
import pathlib
import sys
import time
from collections.abc import Callable

import orjson
from isal import igzip

from beamtrove.metrics import StepMetrics
from beamtrove.transforms.writers.jsonl import JsonlFormat
from benchmarks.common import Results, add_workdir_arguments, argument_parser, read_jsonl
from benchmarks.generated_corpus import write_corpus

# Python's gzip streams, each as the writer opens one over a file: beamtrove's (zlib) and ISA-L's.
_STREAMS: dict[str, Callable[[io.BytesIO], object]] = {
    "zlib, level 1": lambda file: gzip.GzipFile(filename="", fileobj=file, mode="wb", compresslevel=1, mtime=0),
    "ISA-L, level 2 (the writer's before)": lambda file: igzip.IGzipFile(
        filename="", fileobj=file, mode="wb", compresslevel=2, mtime=0
    ),
    "ISA-L, level 1": lambda file: igzip.IGzipFile(filename="", fileobj=file, mode="wb", compresslevel=1, mtime=0),
}


def _best_of_three(write: Callable[[io.BytesIO], None]) -> tuple[bytes, float]:
    """The bytes ``write`` puts in a file, and its seconds (the best of three)."""
    best, data = float("inf"), b""
    for _ in range(3):
        start = time.perf_counter()
        data = _written(write)
        best = min(best, time.perf_counter() - start)
    return data, best


def _written(write: Callable[[io.BytesIO], None]) -> bytes:
    """The bytes ``write`` puts in a file."""
    file = io.BytesIO()
    write(file)
    return file.getvalue()


def _stream_writes(open_stream: Callable[[io.BytesIO], object], pieces: list[bytes]) -> Callable[[io.BytesIO], None]:
    def write(file: io.BytesIO) -> None:
        out = open_stream(file)
        for piece in pieces:
            out.write(piece)
        out.close()

    return write


def _writer_writes(rows: list[dict]) -> Callable[[io.BytesIO], None]:
    """What beamtrove's JSONL format does with ``rows`` (a ``.gz`` file, each row as it is)."""

    def write(file: io.BytesIO) -> None:
        out = JsonlFormat(lambda row: row).open(file, ".jsonl.gz", StepMetrics("write"))
        for row in rows:
            out.write(row)
        out.close()

    return write


def _digest(data: bytes) -> str:
    # Past the 10-byte header, whose OS byte differs between Python's gzip writers.
    return hashlib.sha256(data[10:]).hexdigest()[:12]


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--input", type=pathlib.Path, help="folder of .jsonl.gz files (default: a generated corpus)")
    parser.add_argument("--documents", type=int, default=20_000, help="documents of the generated corpus")
    add_workdir_arguments(parser, "beamtrove-gzip-writing")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    folder = args.input
    if folder is None:
        folder = args.workdir / f"corpus-{args.documents}"
        if not (folder / "corpus.json").exists():
            write_corpus(folder, args.documents, files=1)
    rows = list(read_jsonl(sorted(folder.glob("*.jsonl.gz"))))
    lines = [orjson.dumps(row) + b"\n" for row in rows]
    text = b"".join(lines)
    print(results.note(f"input: {len(rows):,} rows, {len(text) / 1e6:.1f} MB of JSON, from {folder}"))
    # Three cuts of the same text: as the writer writes (a row's JSON, then its newline), rows cut in halves, and
    # the whole text at once.
    cuts = [
        [piece for line in lines for piece in (line[:-1], b"\n")],
        [piece for line in lines for piece in (line[: len(line) // 2], line[len(line) // 2 :])],
        [text],
    ]
    written, seconds = _best_of_three(_writer_writes(rows))
    size = f"{len(written) / len(text):.3f}"
    table = [["beamtrove's JSONL writer", f"{len(text) / 1e6 / seconds:.1f}", f"{len(written):,}", size, ""]]
    digests = {}
    for name, open_stream in _STREAMS.items():
        data, seconds = _best_of_three(_stream_writes(open_stream, cuts[0]))
        digests[name] = {_digest(data)} | {
            _digest(_written(_stream_writes(open_stream, pieces))) for pieces in cuts[1:]
        }
        size = f"{len(data) / len(text):.3f}"
        table.append([name, f"{len(text) / 1e6 / seconds:.1f}", f"{len(data):,}", size, len(digests[name])])
    columns = ["compressor", "MB/s of JSON", "bytes", "size / text", "different files from the 3 cuts"]
    print(results.table("Compressing the same rows, one core", columns, table))
    ours = results.check(
        "the writer's file is zlib's, the same bytes from every cut of the writes",
        digests["zlib, level 1"] == {_digest(written)},
    )
    results.write()
    if not ours:
        sys.exit("the writer's gzip bytes are not zlib's of the text whatever the cut")


if __name__ == "__main__":
    main()
