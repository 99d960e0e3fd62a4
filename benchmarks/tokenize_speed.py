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
        [--datatrove_venv PATH] [--runner_mode multi_processing|in_memory] [--results FILE]
"""

from __future__ import annotations

import pathlib
import shutil
import statistics
import sys
import time

from beamtrove.stats import read_stats
from beamtrove.transforms.tokens import load_tokenizer
from benchmarks.common import (
    GIB,
    TOKENIZER,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    read_jsonl,
    run_measured,
    verdict,
    write_jsonl,
)
from benchmarks.token_inputs import datatrove_tokenize_command, prepare_documents

LIMIT_GOAL = 0.9
DATATROVE_GOAL = 1.0
_BATCH = 1000


def _split_input(documents: pathlib.Path, folder: pathlib.Path, files: int) -> list[str]:
    """Writes the documents round-robin into ``files`` JSONL files; returns the texts in order."""
    if folder.exists():
        shutil.rmtree(folder)
    # No loss ranges here: both tools write tokens and index only.
    texts = [row["text"] for row in read_jsonl([documents])]
    for part in range(files):
        write_jsonl(folder / f"part-{part:03d}.jsonl", ({"text": text} for text in texts[part::files]))
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
    parser = argument_parser(__doc__)
    add_workdir_arguments(parser, "beamtrove-tok")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--num_shards", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runner_mode", default="in_memory", choices=("multi_processing", "in_memory"))
    add_datatrove_venv_argument(parser)
    args = parser.parse_args(argv)
    results = Results(__file__, __doc__, args)

    python = datatrove_python(args.datatrove_venv)
    documents = prepare_documents(args.workdir, records=args.records, repeat=args.repeat)
    source = args.workdir / "speed-input"
    texts = _split_input(documents, source, args.files)
    print(
        results.note(
            f"input: {len(texts)} real extracted documents ({args.repeat} x the extracted set) in {args.files} files"
        )
    )

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
            same = results.check(
                f"round {number}, {label}: same token counts", stats_tokens == tokens == dt_tokens == limit_tokens
            )
            if not same:
                print(f"FAIL token counts: beamtrove files {tokens}, stats {stats_tokens}, DataTrove {dt_tokens}")
            measured.append((limit_wall / wall, dt_wall / wall))
        table = [
            [name, f"{wall:.2f}", tokens, f"{tokens / wall / 1e6:.3f}", f"{pss / GIB:.2f}" if pss else ""]
            for name, wall, tokens, pss in rows
        ]
        columns = ["run", "wall s", "tokens", "M tokens/s", "peak PSS GiB"]
        print(f"\nround {number}:\n{results.table(f'Round {number}', columns, table)}")

    print("\nratios (beamtrove speed / other speed), median over the rounds:")
    for label, values in ratios.items():
        vs_limit = statistics.median(v for v, _ in values)
        vs_datatrove = statistics.median(d for _, d in values)
        results.check(f"{label}: beamtrove >= {LIMIT_GOAL} x the encode_batch loop", vs_limit >= LIMIT_GOAL)
        results.check(f"{label}: beamtrove >= {DATATROVE_GOAL} x DataTrove", vs_datatrove >= DATATROVE_GOAL)
        each = ", ".join(f"{v:.2f}/{d:.2f}" for v, d in values)
        print(
            "  "
            + results.note(
                f"{label}: {vs_limit:.2f} x the encode_batch loop, {vs_datatrove:.2f} x DataTrove (rounds: {each})"
            )
        )
    print(
        f"\n{verdict(results.passed)} goals: beamtrove >= {LIMIT_GOAL} x the encode_batch loop and "
        f">= {DATATROVE_GOAL} x DataTrove, same token counts"
    )
    results.write()
    return 0 if results.passed else 1


if __name__ == "__main__":
    sys.exit(main())
