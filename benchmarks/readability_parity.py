"""Does beamtrove's ReadabilityInscriptis give the same texts as DataTrove 0.10.1's?

Extracts the 181 pages of ../shared/data/article-extraction-benchmark with
beamtrove's ``ReadabilityInscriptis`` and with DataTrove's, both with their
defaults, and prints how many texts are identical, how many differ, and the
first differences.

The texts compared are those of each extractor's ``extract`` called in a loop,
with no time limit. DataTrove's extractor then also runs as a pipeline step
(its ``run``), where its sandbox gives each page 0.1 s of wall-clock time by
default, counting the start of a new extraction process after a timeout: the
pages it keeps and its stats are printed. With DataTrove 0.10.1 and the fork
it keeps none, whatever the timeout: the sandbox warms each new extraction
process up on an empty document, on which the fork raises ("Document is
empty"), so the process dies before it says it is ready and the page counts as
a timeout. beamtrove limits CPU time instead (1 s per page by default in
``beamtrove run extract``), which load does not change.

DataTrove 0.10.1 needs Hugging Face's fork of readability-lxml (branch
``speedup`` of huggingface/python-readability, which is on no package
registry); pass a checkout of it with ``--readability-fork`` and it is installed
into DataTrove's venv, with inscriptis from PyPI. DataTrove's check of that
dependency compares installed distribution names with the fork's pip URL and so
never passes; the script checks the module and distribution names instead,
leaving the extractor itself as DataTrove ships it.

Usage:
    python -m benchmarks.readability_parity [--readability-fork DIR] [--show 5] [--datatrove-venv PATH]
"""

from __future__ import annotations

import argparse
import difflib
import json
import pathlib
import subprocess
import sys
import tempfile

from beamtrove.transforms.extractors import ReadabilityInscriptis
from benchmarks.datatrove_env import DEFAULT_VENV, datatrove_python
from benchmarks.extraction_quality import DATA, load_pages

_HAS_FORK = """
import inspect, readability
raise SystemExit("min_text_score" not in inspect.signature(readability.Document).parameters)
"""

_DATATROVE_SCRIPT = """
import json, sys
from datatrove.data import Document
from datatrove.pipeline.extractors import ReadabilityInscriptis

ReadabilityInscriptis._requires_dependencies = ["inscriptis", ("readability", "readability-lxml")]
extractor = ReadabilityInscriptis()
pages = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
texts = {page["id"]: extractor.extract(page["html"]) for page in pages}
kept = {document.id for document in extractor.run(Document(text=page["html"], id=page["id"]) for page in pages)}
counts = ("total", "extracted", "forwarded", "dropped", "timeout", "broken_process", "clean_error")
stats = {key: extractor.stats.stats[key].total for key in counts if key in extractor.stats.stats}
json.dump({"texts": texts, "kept": sorted(kept), "stats": stats, "timeout": extractor.timeout}, sys.stdout)
"""


def _install_fork(python: pathlib.Path, fork: pathlib.Path | None) -> None:
    """Makes sure DataTrove's venv has the readability-lxml fork and inscriptis DataTrove calls."""
    if subprocess.run([str(python), "-c", _HAS_FORK], check=False, capture_output=True).returncode == 0:
        return
    if fork is None:
        sys.exit(
            "DataTrove's venv lacks Hugging Face's readability-lxml fork: pass --readability-fork DIR, a checkout "
            "of branch speedup of huggingface/python-readability"
        )
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "inscriptis", str(fork)], check=True)


def _datatrove(python: pathlib.Path, ids: list[str], htmls: list[str]) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as batch:
        for page_id, html in zip(ids, htmls, strict=True):
            batch.write(json.dumps({"id": page_id, "html": html}) + "\n")
        batch.flush()
        return json.loads(
            subprocess.run(
                [str(python), "-c", _DATATROVE_SCRIPT, batch.name], check=True, capture_output=True, text=True
            ).stdout
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=pathlib.Path, default=DATA, help="the article-extraction-benchmark folder")
    parser.add_argument("--readability-fork", type=pathlib.Path, help="checkout of DataTrove's readability-lxml fork")
    parser.add_argument("--show", type=int, default=5, help="differences to print")
    parser.add_argument("--datatrove-venv", type=pathlib.Path, default=DEFAULT_VENV)
    args = parser.parse_args()
    if not (args.data / "ground-truth.json").exists():
        sys.exit(f"{args.data} is absent: pass --data DIR or keep ../shared beside the checkout")

    ids = sorted(json.loads((args.data / "ground-truth.json").read_text(encoding="utf-8")))
    htmls = [html for html, _ in load_pages(args.data)]
    python = datatrove_python(args.datatrove_venv)
    _install_fork(python, args.readability_fork)
    theirs = _datatrove(python, ids, htmls)
    extractor = ReadabilityInscriptis()
    extractor.setup()
    ours = {page_id: extractor.extract(html) for page_id, html in zip(ids, htmls, strict=True)}

    different = [page_id for page_id in ids if ours[page_id] != theirs["texts"][page_id]]
    print(f"{len(ids)} pages of {args.data}")
    print(f"empty texts: beamtrove {sum(not text for text in ours.values())}, ", end="")
    print(f"DataTrove {sum(not text for text in theirs['texts'].values())}")
    print(f"identical texts: {len(ids) - len(different)}, different: {len(different)}")
    print(
        f"\nDataTrove's run ({theirs['timeout']} s wall-clock per page): kept {len(theirs['kept'])}, {theirs['stats']}"
    )
    for page_id in different[: args.show]:
        mine, datatrove = ours[page_id], theirs["texts"][page_id]
        print(f"\n{page_id}: beamtrove {len(mine)} characters, DataTrove {len(datatrove)}")
        lines = difflib.unified_diff(datatrove.splitlines(), mine.splitlines(), "DataTrove", "beamtrove", n=0)
        print("\n".join(list(lines)[:12]))


if __name__ == "__main__":
    main()
