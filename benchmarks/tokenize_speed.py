"""Tokens per second of ``beamtrove run tokenize`` against its limit and against DataTrove, in one run.

On real extracted documents (see ``benchmarks.token_inputs``), repeated
``--repeat`` times and split into ``--files`` JSONL files, this measures:

* the limit: a plain loop of ``Tokenizer.encode_batch`` over the same texts,
  1000 at a time, with the same GPT-2 tokenizer and EOS (texts already in
  memory; the tokenizer uses every core), measured again right before each
  beamtrove run;
* ``beamtrove run tokenize`` on the DirectRunner (``--runner_mode``), wall
  clock of the whole command (the one installed beside this interpreter):
  start-up, reading, tokenizing, shuffling into ``--num_shards`` shards,
  writing, the report;
* DataTrove 0.10.1's JsonlReader → DocumentTokenizer on
  LocalPipelineExecutor (tasks = ``--files``, workers = 2), in its venv,
  wall clock of the whole command;

each without and with document shuffling, ``--rounds`` times in turn (this
shared machine's speed drifts over minutes), and prints tokens/s per round
and the median ratios (goal: beamtrove ≥ 0.9 x encode_batch and ≥ DataTrove). Peak memory is the
summed PSS of each command's process tree. Runs nothing else meanwhile: on 2
cores, any other load skews the figures.

Usage:
    python -m benchmarks.tokenize_speed [--repeat 10] [--rounds 2] [--files 4] [--num_shards 2] [--workdir DIR]
        [--datatrove-venv PATH] [--runner_mode multi_processing|in_memory]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

from beamtrove.stats import read_stats
from beamtrove.transforms.tokens import load_tokenizer
from benchmarks.datatrove_env import DEFAULT_VENV, datatrove_python
from benchmarks.measure import run_measured
from benchmarks.token_inputs import TOKENIZER, datatrove_tokenize_command, prepare_documents

LIMIT_GOAL = 0.9
DATATROVE_GOAL = 1.0
_BATCH = 1000


def _split_input(documents: pathlib.Path, folder: pathlib.Path, files: int) -> list[str]:
    """Writes the documents round-robin into ``files`` JSONL files; returns the texts in order."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    outs = [(folder / f"part-{n:03d}.jsonl").open("w", encoding="utf-8") for n in range(files)]
    texts = []
    with documents.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            row = json.loads(line)
            row.pop("metadata", None)  # no loss ranges here: both tools write tokens and index only
            texts.append(row["text"])
            outs[number % files].write(json.dumps(row, ensure_ascii=False) + "\n")
    for out in outs:
        out.close()
    return texts


def _encode_limit(texts: list[str], method: str) -> tuple[float, int]:
    tokenizer = load_tokenizer(str(TOKENIZER))
    encode = getattr(tokenizer, method)
    tokens = 0
    start = time.perf_counter()
    for first in range(0, len(texts), _BATCH):
        tokens += sum(len(encoding.ids) for encoding in encode(texts[first : first + _BATCH]))
    return time.perf_counter() - start, tokens


def _beamtrove() -> str:
    """The ``beamtrove`` command installed beside this interpreter, as a virtual environment's ``bin/`` holds it.

    Found through PATH instead, it may be a version manager's shim (pyenv's
    starts a shell and pyenv before Python), whose start-up is not beamtrove's.
    """
    beside = pathlib.Path(sys.executable).with_name("beamtrove")
    return str(beside) if beside.exists() else "beamtrove"


def _tokens_in(folder: pathlib.Path) -> int:
    return sum(path.stat().st_size // 2 for path in folder.glob("*.ds"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()) / "beamtrove-tok")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--num_shards", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runner_mode", default="in_memory", choices=("multi_processing", "in_memory"))
    parser.add_argument("--datatrove-venv", type=pathlib.Path, default=DEFAULT_VENV)
    args = parser.parse_args(argv)

    python = datatrove_python(args.datatrove_venv)
    documents = prepare_documents(args.workdir, records=args.records, repeat=args.repeat)
    source = args.workdir / "speed-input"
    texts = _split_input(documents, source, args.files)
    print(f"input: {len(texts)} real extracted documents ({args.repeat} x the extracted set) in {args.files} files")

    failures = 0
    ratios: dict[str, list[tuple[float, float]]] = {"unshuffled": [], "shuffled": []}
    for number in range(1, args.rounds + 1):
        rows = []
        for label, measured in ratios.items():
            shuffle = label == "shuffled"
            # The limit is measured right before the run it is compared with: this shared machine's speed drifts
            # by 10-20 % over minutes.
            limit_wall, limit_tokens = _encode_limit(texts, "encode_batch")
            rows.append((f"limit: encode_batch loop ({label})", limit_wall, limit_tokens, None))
            dt_out, bt_out = args.workdir / "speed-datatrove", args.workdir / "speed-beamtrove"
            for folder in (dt_out, bt_out, pathlib.Path(f"{dt_out}-logs")):
                shutil.rmtree(folder, ignore_errors=True)
            command = [_beamtrove(), "run", "tokenize", "--input", str(source), "--output", str(bt_out)]
            command += ["--input_format", "jsonl", "--tokenizer", str(TOKENIZER), "--num_shards", str(args.num_shards)]
            command += ["--progress_interval", "0", "--direct_running_mode", args.runner_mode]
            if args.runner_mode == "multi_processing":
                command += ["--direct_num_workers", "2"]
            command += ["--shuffle_seed", "1"] if shuffle else []
            wall, monitor = run_measured(command, args.workdir / "speed-beamtrove.log")
            tokens = _tokens_in(bt_out)
            rows.append((f"beamtrove tokenize ({args.runner_mode}), {label}", wall, tokens, monitor.peak_pss))
            command = datatrove_tokenize_command(python, source, dt_out, tasks=args.files, shuffle=shuffle)
            dt_wall, monitor = run_measured(command, args.workdir / "speed-datatrove.log")
            dt_tokens = _tokens_in(dt_out)
            rows.append((f"DataTrove DocumentTokenizer, {label}", dt_wall, dt_tokens, monitor.peak_pss))
            stats_tokens = read_stats(str(bt_out))["steps"]["tokenize"]["counters"]["tokens"]
            if not stats_tokens == tokens == dt_tokens == limit_tokens:
                print(f"FAIL token counts: beamtrove files {tokens}, stats {stats_tokens}, DataTrove {dt_tokens}")
                failures += 1
            measured.append((limit_wall / wall, dt_wall / wall))
        print(f"\nround {number}: {'run':<48} {'wall s':>8} {'tokens':>12} {'M tokens/s':>11} {'peak PSS':>9}")
        for name, wall, tokens, pss in rows:
            memory = f"{pss / 2**30:.2f} GiB" if pss else ""
            print(f"         {name:<48} {wall:>8.2f} {tokens:>12,} {tokens / wall / 1e6:>11.3f} {memory:>9}")

    print("\nratios (beamtrove speed / other speed), median over the rounds:")
    for label, values in ratios.items():
        vs_limit = statistics.median(v for v, _ in values)
        vs_datatrove = statistics.median(d for _, d in values)
        failures += vs_limit < LIMIT_GOAL or vs_datatrove < DATATROVE_GOAL
        each = ", ".join(f"{v:.2f}/{d:.2f}" for v, d in values)
        print(f"  {label}: {vs_limit:.2f} x the encode_batch loop, {vs_datatrove:.2f} x DataTrove (rounds: {each})")
    print(
        f"\n{'PASS' if not failures else 'FAIL'} goals: beamtrove >= {LIMIT_GOAL} x the encode_batch loop and "
        f">= {DATATROVE_GOAL} x DataTrove, same token counts"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
