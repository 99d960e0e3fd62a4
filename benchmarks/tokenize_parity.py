"""Byte compatibility of ``beamtrove run tokenize`` with DataTrove 0.10.1's DocumentTokenizer.

On real extracted documents (see ``benchmarks.token_inputs``), in the same run:

* tokenizes the same JSONL, same order, no shuffling, GPT-2 tokenizer with
  EOS ``<|endoftext|>``, with DataTrove's DocumentTokenizer
  (LocalPipelineExecutor, one task, in its own venv) and with
  ``beamtrove run tokenize --num_shards 1``; twice: plain, and with loss masks
  (a third of the documents carry ``no_loss_ranges``);
* compares the ``.ds``, ``.ds.index``, ``.ds.loss`` and ``.ds.metadata`` files
  byte for byte;
* has DataTrove read beamtrove's files with its own readers
  (``DatatroveFileDataset`` over every window, with positions from the
  index, and ``DocumentTokenizerMerger``) and compares what it read with what
  it reads from its own files;
* reads beamtrove's shard back with beamtrove's reader and checks every
  document against the tokenizer's own encoding of its text.

Prints PASS/FAIL per check; exits 1 when a check fails.

Usage:
    python -m benchmarks.tokenize_parity [--workdir DIR] [--records 3000] [--datatrove_venv PATH] [--results FILE]
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tempfile

import numpy as np

from beamtrove.fs import InputFile
from beamtrove.transforms.tokens import TokenizedDocument, TokenShardParser, load_tokenizer
from benchmarks.common import (
    TOKENIZER,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    json_output,
    only_file,
    read_jsonl,
    run_measured,
    verdict,
)
from benchmarks.token_inputs import datatrove_tokenize_command, prepare_documents

# Runs in DataTrove's venv: argv = folder of .ds shards, a scratch folder, loss ("1"/"0").
# Prints a JSON digest of everything DataTrove's readers got out of the shards.
_DATATROVE_READ = """
import glob, hashlib, json, os, sys
from datatrove.pipeline.tokens.merger import DocumentTokenizerMerger
from datatrove.utils.dataset import DatatroveFileDataset

folder, scratch, loss = sys.argv[1:4]
(shard,) = glob.glob(os.path.join(folder, "*.ds"))
dataset = DatatroveFileDataset(shard, seq_len=1024, token_size=2, return_positions=True)
ids, positions = hashlib.sha256(), hashlib.sha256()
for item in range(len(dataset)):
    window = dataset[item]
    ids.update(window["input_ids"].numpy().tobytes())
    positions.update(window["positions"].numpy().tobytes())
DocumentTokenizerMerger(
    folder, scratch, save_filename="merged", shuffle=False, save_loss_metadata=loss == "1", progress=False
).run()
merged = {
    name: hashlib.sha256(open(os.path.join(scratch, name), "rb").read()).hexdigest()
    for name in sorted(os.listdir(scratch))
}
print(json.dumps({"windows": len(dataset), "input_ids": ids.hexdigest(), "positions": positions.hexdigest(),
                  "merged": merged}))
"""

_SUFFIXES = ("", ".index", ".loss", ".metadata")


def _datatrove_read(python: pathlib.Path, folder: pathlib.Path, with_loss: bool) -> dict:
    # The merger reads every *.ds of the folder: give it the shard files alone.
    with tempfile.TemporaryDirectory() as alone, tempfile.TemporaryDirectory() as scratch:
        shard = only_file(folder, "*.ds")
        for suffix in _SUFFIXES:
            if pathlib.Path(str(shard) + suffix).exists():
                shutil.copy(str(shard) + suffix, alone)
        return json_output([python, "-c", _DATATROVE_READ, alone, scratch, "1" if with_loss else "0"])


def _read_shard(shard: pathlib.Path) -> list:
    """What beamtrove's reader gets out of ``shard``."""
    file = InputFile(url=str(shard), name=shard.name, size=shard.stat().st_size)
    with shard.open("rb") as stream:
        return list(TokenShardParser().parse(file, stream, "roundtrip"))


def _contents(shard: pathlib.Path) -> list[tuple]:
    """``(tokens, loss mask)`` bytes of each document beamtrove's reader gets (ids name the file, so they differ)."""
    return [
        (d.tokens.tobytes(), None if d.loss_mask is None else d.loss_mask.tobytes())
        if isinstance(d, TokenizedDocument)
        else ("dead letter", d.reason)
        for d in _read_shard(shard)
    ]


def _roundtrip_mismatches(shard: pathlib.Path, documents: pathlib.Path) -> tuple[int, int]:
    """``(documents, mismatches)``: beamtrove's reading of ``shard`` against the tokenizer's encoding of each text."""
    tokenizer = load_tokenizer(str(TOKENIZER))
    texts = [row["text"] for row in read_jsonl([documents])]
    read = _read_shard(shard)
    mismatches = sum(
        not isinstance(document, TokenizedDocument)
        or not np.array_equal(document.tokens, np.array(encoding.ids, dtype=np.uint16))
        for document, encoding in zip(read, tokenizer.encode_batch(texts), strict=False)
    )
    return len(read), mismatches + abs(len(read) - len(texts))


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    add_workdir_arguments(parser, "beamtrove-tok")
    parser.add_argument("--records", type=int, default=3000)
    add_datatrove_venv_argument(parser)
    args = parser.parse_args(argv)
    results = Results(__file__, __doc__, args)

    python = datatrove_python(args.datatrove_venv)
    documents = prepare_documents(args.workdir, records=args.records)
    with documents.open() as lines:
        count = sum(1 for _ in lines)
    print(results.note(f"input: {documents} ({count} real extracted documents)"))

    def check(label: str, goal: str, passed: bool) -> str:
        return verdict(results.check(f"{label}: {goal}", passed))

    for with_loss in (False, True):
        label = "with loss masks" if with_loss else "plain"
        run_dir = args.workdir / ("parity-loss" if with_loss else "parity")
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        dt_out, bt_out = run_dir / "datatrove", run_dir / "beamtrove"
        datatrove = datatrove_tokenize_command(python, documents.parent, dt_out, loss=with_loss)
        run_measured(datatrove, run_dir / "datatrove.log")
        command = ["beamtrove", "run", "tokenize", "--input", str(documents), "--output", str(bt_out)]
        command += ["--tokenizer", str(TOKENIZER), "--num_shards", "1", "--progress_interval", "0"]
        run_measured(command + (["--loss_mask"] if with_loss else []), run_dir / "beamtrove.log")

        dt_shard, bt_shard = only_file(dt_out, "*.ds"), only_file(bt_out, "*.ds")
        print(f"\n{label}: DataTrove {dt_shard.name} vs beamtrove {bt_shard.name}")
        for suffix in _SUFFIXES:
            theirs, ours = pathlib.Path(str(dt_shard) + suffix), pathlib.Path(str(bt_shard) + suffix)
            if not theirs.exists() and not ours.exists():
                continue
            same = theirs.exists() and ours.exists() and theirs.read_bytes() == ours.read_bytes()
            size = os.path.getsize(ours) if ours.exists() else 0
            goal = f".ds{suffix} byte-identical ({size:,} bytes)"
            print(f"  {check(label, goal, same)} {goal}")
        theirs_read, ours_read = _datatrove_read(python, dt_out, with_loss), _datatrove_read(python, bt_out, with_loss)
        goal = (
            f"DataTrove's DatatroveFileDataset ({ours_read['windows']} windows of 1025 tokens, ids and positions) and "
            "DocumentTokenizerMerger read the same from beamtrove's files as from DataTrove's"
        )
        print(f"  {check(label, goal, theirs_read == ours_read)} {goal}")
        theirs_docs, ours_docs = _contents(dt_shard), _contents(bt_shard)
        same = theirs_docs == ours_docs and not any(d[0] == "dead letter" for d in ours_docs)
        goal = (
            f"beamtrove's reader gets the same {len(theirs_docs)} documents (tokens and loss masks) from DataTrove's "
            "files as from its own"
        )
        print(f"  {check(label, goal, same)} {goal}")
        if not with_loss:
            read, mismatches = _roundtrip_mismatches(bt_shard, documents)
            goal = (
                f"beamtrove's reader: {read} documents, {mismatches} differ from the tokenizer's encoding of their text"
            )
            print(f"  {check(label, goal, not mismatches)} {goal}")
    results.write()
    return 0 if results.passed else 1


if __name__ == "__main__":
    sys.exit(main())
