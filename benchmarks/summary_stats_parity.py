"""Do beamtrove's summary statistics equal DataTrove's on the same documents?

Builds ``make_warc.py --records 3000 --files 4 --seed 1`` WARCs, extracts
them with ``beamtrove run extract``, then computes over the same JSONL
documents DataTrove 0.10.1's ``DocStats``, ``WordStats``, ``LineStats`` and
``LangStats`` (defaults, all four groups; merged with ``StatsMerger``) in
its own venv, and ``beamtrove run stats`` with the same blocks and groups.
Prints, per group and statistic, whether every key's figures are equal or
their largest relative difference, and the keys found on one side only::

    python -m benchmarks.summary_stats_parity [--workdir DIR] [--word_splitter spacy|beamtrove] [--results FILE]

Both sides score languages with ``lid.176.ftz`` (DataTrove's model URL is
pointed at the local file, see DATATROVE_NOTES).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from benchmarks.common import (
    LID_MODEL,
    Results,
    add_datatrove_venv_argument,
    add_warc_set_arguments,
    argument_parser,
    datatrove_python,
    jsonl_rows,
    warc_set_of,
)

_DATATROVE_STATS = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.stats import DocStats, LangStats, LineStats, StatsMerger, WordStats

documents, partial, merged, lid_model, logs = sys.argv[1:]
lang = LangStats(partial, language="en")
# Offline: the model instance downloads from MODEL_URL, so point it at the local file.
lang.fasttext.MODEL_URL = lid_model
lang.fasttext.MODEL_SUBFOLDER = "ft176-ftz-beamtrove-parity"
LocalPipelineExecutor(
    [
        JsonlReader(documents, glob_pattern="*.jsonl.gz"),
        DocStats(partial), WordStats(partial), LineStats(partial), lang,
    ],
    tasks=1, workers=1, logging_dir=logs + "/stats",
).run()
LocalPipelineExecutor([StatsMerger(partial, merged)], tasks=1, workers=1, logging_dir=logs + "/merge").run()
"""


def _run(command: list[str]) -> None:
    print("$", " ".join(command), file=sys.stderr)
    subprocess.run(command, check=True)


def _metric_files(folder: pathlib.Path) -> dict[str, dict]:
    return {
        f"{path.parent.parent.name}/{path.parent.name}": json.loads(path.read_text())
        for path in sorted(folder.glob("*/*/metric.json"))
    }


def _relative(ours: float, theirs: float) -> float:
    if ours == theirs:
        return 0.0
    return abs(ours - theirs) / max(abs(ours), abs(theirs))


def _figures(entry) -> dict[str, float]:
    return entry if isinstance(entry, dict) else {"total": entry}


def compare(ours: dict, theirs: dict) -> tuple[int, float, list[str], list[str], list[str]]:
    """(keys compared, largest relative difference, keys only ours, keys only theirs, fields differing)."""
    shared = sorted(set(ours) & set(theirs))
    worst = 0.0
    fields = set()
    for key in shared:
        mine, other = _figures(ours[key]), _figures(theirs[key])
        for field in set(mine) | set(other):
            if field == "unit":
                continue
            if field not in mine or field not in other:
                fields.add(f"{field} on one side")
                continue
            difference = _relative(float(mine[field]), float(other[field]))
            if difference:
                fields.add(field)
            worst = max(worst, difference)
    return len(shared), worst, sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours)), sorted(fields)


def main() -> None:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=3000, files=4, workdir_name="beamtrove-summary-stats-parity")
    add_datatrove_venv_argument(parser)
    parser.add_argument(
        "--word_splitter",
        choices=("spacy", "beamtrove"),
        default="spacy",
        help="beamtrove's --word_splitter: spacy (as DataTrove) or beamtrove (its filters' splitter)",
    )
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    workdir, warc_dir = warc_set_of(args)
    extracted = workdir / "extract"
    if not (extracted / "stats.json").exists():
        _run(
            [
                "beamtrove",
                "run",
                "extract",
                "--input",
                f"{warc_dir}/*.warc.gz",
                "--output",
                str(extracted),
                "--overwrite",
                "--direct_running_mode=multi_processing",
                "--direct_num_workers=2",
                "--progress_interval",
                "0",
            ]
        )
    documents = extracted / "documents"
    print(results.note(f"extracted documents: {sum(1 for _ in jsonl_rows(documents, '*.jsonl.gz'))}"))

    theirs_dir = workdir / "datatrove"
    if not (theirs_dir / "merged").exists():
        python = datatrove_python(args.datatrove_venv)
        _run(
            [
                str(python),
                "-c",
                _DATATROVE_STATS,
                str(documents),
                str(theirs_dir / "partial"),
                str(theirs_dir / "merged"),
                str(LID_MODEL),
                str(theirs_dir / "logs"),
            ]
        )
    ours_dir = workdir / f"beamtrove-{args.word_splitter}"
    _run(
        [
            "beamtrove",
            "run",
            "stats",
            "--input",
            str(extracted),
            "--output",
            str(ours_dir),
            "--overwrite",
            "--summary_stats",
            "doc,word,line,lang",
            "--summary_groups",
            "summary,histogram,fqdn,suffix",
            "--summary_lid_model",
            str(LID_MODEL),
            "--word_splitter",
            args.word_splitter,
            "--progress_interval",
            "0",
        ]
    )

    ours, theirs = _metric_files(ours_dir / "summary_stats"), _metric_files(theirs_dir / "merged")
    files = (
        f"files: beamtrove {len(ours)}, DataTrove {len(theirs)}; only beamtrove: "
        f"{sorted(set(ours) - set(theirs)) or '-'}; only DataTrove: {sorted(set(theirs) - set(ours)) or '-'}"
    )
    print(f"\n{results.note(files)}")
    rows = []
    for name in sorted(set(ours) & set(theirs)):
        keys, worst, only_ours, only_theirs, fields = compare(ours[name], theirs[name])
        equal = not worst and not only_ours and not only_theirs and not fields
        extra = f"{len(only_ours)} / {len(only_theirs)}" if only_ours or only_theirs else ""
        extra += f"; {', '.join(fields)}" if fields else ""
        if only_ours or only_theirs:
            extra += f" (e.g. ours {only_ours[:3]}, theirs {only_theirs[:3]})"
        rows.append([name, keys, "equal" if equal else f"{worst:.2e}", extra])
    columns = ["group/statistic", "keys", "max rel diff", "keys only ours / theirs; fields differing"]
    print(results.table("Each summary statistic against DataTrove's", columns, rows))
    results.write()


if __name__ == "__main__":
    main()
