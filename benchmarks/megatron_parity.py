"""Parity of Megatron datasets, chunk shuffling and context shuffling with DataTrove 0.10.1.

On real extracted documents (JSONL.gz from ``beamtrove run extract``, text
only, in file and line order, so that beamtrove's ``<file>/<row>`` id order
and DataTrove's input order are the same sequence), GPT-2 tokenizer, EOS as
each DataTrove block adds it by default, DataTrove run by LocalPipelineExecutor
with one task in its own venv:

1. Megatron: DataTrove's ``MegatronDocumentTokenizer`` against
   ``beamtrove run tokenize --output_format megatron --num_shards 1``: ``.bin`` and
   ``.idx`` byte for byte; then megatron-core's own ``IndexedDataset`` (in a
   venv with torch and megatron-core, skipped with a message when absent)
   reads beamtrove's dataset, and every document must equal GPT-2's encoding
   of its text. Twice: GPT-2 (2-byte ids) and a word-level tokenizer over the
   documents' own words when they have more than 65,536 (4-byte ids).
2. Chunk shuffle: DataTrove's ``DocumentTokenizer(seed, shuffle_chunk_size)``,
   which adds no EOS by default, against ``beamtrove run tokenize
   --shuffle_seed --shuffle_chunk_size --eos_token ''``: ``.ds``, ``.ds.index``
   and ``.ds.metadata`` byte for byte.
3. Context shuffle: DataTrove's ``DocumentTokenizerContextShuffler`` (window
   2049, its default) over beamtrove's unshuffled shard, against
   ``beamtrove run merge_tokens --context_shuffle 2049 --shuffle_seed`` of
   the same shard: the ``.ds`` byte for byte (DataTrove writes no index).

Prints figures and PASS/FAIL per check; exits 1 when a check fails.

Usage:
    python -m benchmarks.megatron_parity [--documents DIR] [--workdir DIR] [--seed 5] [--chunk 1000]
        [--datatrove_venv PATH] [--megatron_venv PATH] [--results FILE]
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit

from beamtrove.transforms.tokens import load_tokenizer
from benchmarks.common import (
    TOKENIZER,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jsonl_rows,
    only_file,
    run_measured,
    verdict,
    write_jsonl,
)

DEFAULT_DOCUMENTS = pathlib.Path("/tmp/shared19/extract3k/documents")
DEFAULT_MEGATRON_VENV = pathlib.Path.home() / ".cache" / "beamtrove" / "megatron-venv"
EOS = "<|endoftext|>"

# Runs in DataTrove's venv: argv = JSONL folder, output folder, tokenizer, block, seed, chunk size.
_DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer, DocumentTokenizerContextShuffler, MegatronDocumentTokenizer

source, output, tokenizer, block, seed, chunk = sys.argv[1:7]
if block == "megatron":
    pipeline = [JsonlReader(source), MegatronDocumentTokenizer(output, tokenizer_name_or_path=tokenizer)]
elif block == "chunks":
    pipeline = [
        JsonlReader(source),
        DocumentTokenizer(output, tokenizer_name_or_path=tokenizer, seed=int(seed), shuffle_chunk_size=int(chunk)),
    ]
else:
    pipeline = [DocumentTokenizerContextShuffler(source, output, seed=int(seed))]
LocalPipelineExecutor(pipeline=pipeline, tasks=1, logging_dir=output + "-logs").run()
"""

# Runs in the megatron-core venv: argv = dataset prefix, output .npz. Saves every document's tokens as read.
_MEGATRON_READ = """
import sys, numpy
from megatron.core.datasets.indexed_dataset import IndexedDataset
dataset = IndexedDataset(sys.argv[1])
documents = [dataset[i] for i in range(len(dataset))]
numpy.savez(sys.argv[2], lengths=numpy.array([len(d) for d in documents]),
            tokens=numpy.concatenate(documents).astype(numpy.int64), dtype=str(documents[0].dtype),
            document_indices=dataset.document_indices)
"""


def _prepare(texts: list[str], folder: pathlib.Path) -> pathlib.Path:
    """``folder``, holding the texts as ``documents.jsonl``, without ids."""
    write_jsonl(folder / "documents.jsonl", ({"text": text} for text in texts))
    return folder


def _word_tokenizer(texts: list[str], path: pathlib.Path) -> int:
    """Writes a word-level tokenizer over the texts' words (and EOS) to ``path``; returns its vocabulary size."""
    words = sorted({word for text in texts for word in text.split()})
    vocabulary = {"[UNK]": 0, EOS: 1, **{word: i + 2 for i, word in enumerate(words)}}
    tokenizer = Tokenizer(WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = WhitespaceSplit()
    tokenizer.save(str(path))
    return len(vocabulary)


def _datatrove(python, source, output, tokenizer, block, seed=0, chunk=0) -> float:
    command = [str(python), "-c", _DATATROVE, str(source), str(output), str(tokenizer), block, str(seed), str(chunk)]
    output.parent.mkdir(parents=True, exist_ok=True)
    return run_measured(command, output.parent / f"{output.name}.log")[0]


def _beamtrove(pipeline: str, output: pathlib.Path, *flags: str) -> float:
    command = ["beamtrove", "run", pipeline, "--output", str(output), "--progress_interval", "0", *flags]
    output.parent.mkdir(parents=True, exist_ok=True)
    return run_measured(command, output.parent / f"{output.name}.log")[0]


def _compare(results: Results, check: str, theirs: pathlib.Path, ours: pathlib.Path) -> None:
    """Prints and records whether ``ours`` is byte for byte DataTrove's ``theirs``."""
    same = results.check(
        f"{check}: .{ours.name.split('.', 1)[1]} byte-identical to DataTrove's",
        theirs.read_bytes() == ours.read_bytes(),
    )
    print(
        f"  {verdict(same)} {ours.name} ({ours.stat().st_size:,} bytes) byte-identical to DataTrove's "
        f"{theirs.name} ({theirs.stat().st_size:,} bytes)"
    )


def _megatron_read_back(
    results: Results, check: str, venv: pathlib.Path, prefix: pathlib.Path, tokenizer: str, texts: list[str]
) -> None:
    """Checks that megatron-core reads every document as the tokenizer encodes its text, unless the venv is absent."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"  SKIP megatron-core read-back: no venv at {venv} (pip install torch megatron-core there)")
        return
    with tempfile.TemporaryDirectory() as scratch:
        read_path = pathlib.Path(scratch) / "read.npz"
        subprocess.run(
            [str(python), "-c", _MEGATRON_READ, str(prefix), str(read_path)], check=True, capture_output=True
        )
        read = np.load(read_path)
        lengths, tokens, dtype = read["lengths"], read["tokens"], str(read["dtype"])
        document_indices = read["document_indices"]
    encodings = load_tokenizer(tokenizer, eos_token=EOS).encode_batch(texts)
    expected = [np.array(encoding.ids, dtype=np.int64) for encoding in encodings]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    differ = sum(
        not np.array_equal(tokens[start : start + length], ids)
        for start, length, ids in zip(starts, lengths, expected, strict=False)
    ) + abs(len(lengths) - len(expected))
    whole = np.array_equal(document_indices, np.arange(len(texts) + 1))
    ok = results.check(f"{check}: megatron-core reads every document as encoded", not differ and whole)
    print(
        f"  {verdict(ok)} megatron-core IndexedDataset reads {len(lengths)} documents, "
        f"{int(lengths.sum()):,} tokens as {dtype}; {differ} differ from the tokenizer's encoding of their text; "
        f"document indices 0..{len(texts)}: {whole}"
    )


def _megatron(
    results: Results, args, python, source: pathlib.Path, texts: list[str], tokenizer: str, label: str
) -> None:
    run = args.workdir / f"megatron-{label}"
    dt_out, bt_out = run / "datatrove", run / "beamtrove"
    dt_seconds = _datatrove(python, source, dt_out, tokenizer, "megatron")
    bt_seconds = _beamtrove(
        "tokenize",
        bt_out,
        "--input",
        str(source / "documents.jsonl"),
        "--tokenizer",
        tokenizer,
        "--output_format",
        "megatron",
    )
    print(f"\n{results.note(f'Megatron, {label}: DataTrove {dt_seconds:.1f} s, beamtrove {bt_seconds:.1f} s')}")
    theirs, ours = only_file(dt_out, "*.bin"), only_file(bt_out, "*.bin")
    check = f"Megatron, {label}"
    _compare(results, check, theirs, ours)
    _compare(results, check, theirs.with_suffix(".idx"), ours.with_suffix(".idx"))
    _megatron_read_back(results, check, args.megatron_venv, ours.with_suffix(""), tokenizer, texts)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--documents", type=pathlib.Path, default=DEFAULT_DOCUMENTS)
    add_workdir_arguments(parser, "beamtrove-megatron")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=1000, help="shuffle_chunk_size. Default: 1000.")
    add_datatrove_venv_argument(parser)
    parser.add_argument("--megatron_venv", type=pathlib.Path, default=DEFAULT_MEGATRON_VENV)
    args = parser.parse_args(argv)
    results = Results(__file__, __doc__, args)

    python = datatrove_python(args.datatrove_venv)
    shutil.rmtree(args.workdir, ignore_errors=True)
    texts = [row["text"] for row in jsonl_rows(args.documents, "*.jsonl.gz")]
    source = _prepare(texts, args.workdir / "input")
    print(results.note(f"input: {len(texts)} documents from {args.documents}, GPT-2 tokenizer {TOKENIZER}"))
    _megatron(results, args, python, source, texts, str(TOKENIZER), "GPT-2")
    words = args.workdir / "words-tokenizer.json"
    vocabulary = _word_tokenizer(texts, words)
    if vocabulary > 1 << 16:
        _megatron(results, args, python, source, texts, str(words), f"word-level vocabulary of {vocabulary:,}")
    else:
        print(f"\n{results.note(f'SKIP 4-byte Megatron files: the documents have only {vocabulary:,} distinct words')}")

    run = args.workdir / "chunks"
    dt_out, bt_out = run / "datatrove", run / "beamtrove"
    _datatrove(python, source, dt_out, TOKENIZER, "chunks", args.seed, args.chunk)
    _beamtrove(
        "tokenize", bt_out, "--input", str(source / "documents.jsonl"), "--tokenizer", str(TOKENIZER),
        "--shuffle_seed", str(args.seed), "--shuffle_chunk_size", str(args.chunk), "--eos_token", "",
    )  # fmt: skip
    theirs, ours = only_file(dt_out, "*.ds"), only_file(bt_out, "*.ds")
    check = f"Chunk shuffle, seed {args.seed}, {args.chunk}-token chunks"
    print(f"\n{check}")
    for suffix in ("", ".index", ".metadata"):
        _compare(results, check, pathlib.Path(f"{theirs}{suffix}"), pathlib.Path(f"{ours}{suffix}"))

    run = args.workdir / "context"
    unshuffled, dt_out, bt_out = run / "unshuffled", run / "datatrove", run / "beamtrove"
    _beamtrove("tokenize", unshuffled, "--input", str(source / "documents.jsonl"), "--tokenizer", str(TOKENIZER))
    _datatrove(python, unshuffled, dt_out, TOKENIZER, "context", args.seed)
    _beamtrove(
        "merge_tokens", bt_out, "--input", str(unshuffled), "--shuffle_seed", str(args.seed),
        "--context_shuffle", "2049",
    )  # fmt: skip
    theirs, ours = only_file(dt_out, "*.ds"), only_file(bt_out, "*.ds")
    windows = ours.stat().st_size // 2 // 2049
    print(f"\nContext shuffle, seed {args.seed}, windows of 2049 tokens ({windows:,} windows)")
    _compare(results, f"Context shuffle, seed {args.seed}, windows of 2049 tokens", theirs, ours)
    results.write()
    return 0 if results.passed else 1


if __name__ == "__main__":
    sys.exit(main())
