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
registry); pass a checkout of it with ``--readability_fork`` and it is installed
into DataTrove's venv, with inscriptis from PyPI. DataTrove's check of that
dependency compares installed distribution names with the fork's pip URL and so
never passes; the script checks the module and distribution names instead,
leaving the extractor itself as DataTrove ships it.

Usage:
    python -m benchmarks.readability_parity [--readability_fork DIR] [--show 5] [--datatrove_venv PATH]
        [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import difflib
import pathlib
import subprocess
import sys
import tempfile

from beamtrove.transforms.extractors import ReadabilityInscriptis
from benchmarks.common import (
    ARTICLES,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    article_pages,
    datatrove_python,
    json_output,
    write_jsonl,
)

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
            "DataTrove's venv lacks Hugging Face's readability-lxml fork: pass --readability_fork DIR, a checkout "
            "of branch speedup of huggingface/python-readability"
        )
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "inscriptis", str(fork)], check=True)


def _datatrove(python: pathlib.Path, pages: dict[str, tuple[str, str]]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        batch = write_jsonl(pathlib.Path(scratch, "pages.jsonl"), ({"id": i, "html": h} for i, (h, _) in pages.items()))
        return json_output([python, "-c", _DATATROVE_SCRIPT, batch])


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--data", type=pathlib.Path, default=ARTICLES, help="the article-extraction-benchmark folder")
    parser.add_argument(
        "--readability_fork",
        type=pathlib.Path,
        help="checkout of DataTrove's readability-lxml fork",
    )
    parser.add_argument("--show", type=int, default=5, help="differences to print")
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-readability-parity")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    if not (args.data / "ground-truth.json").exists():
        sys.exit(f"{args.data} is absent: pass --data DIR or keep ../shared beside the checkout")

    pages = article_pages(args.data)
    python = datatrove_python(args.datatrove_venv)
    _install_fork(python, args.readability_fork)
    theirs = _datatrove(python, pages)
    extractor = ReadabilityInscriptis()
    extractor.setup()
    ours = {page_id: extractor.extract(html) for page_id, (html, _) in pages.items()}

    different = [page_id for page_id in pages if ours[page_id] != theirs["texts"][page_id]]
    empty = sum(not text for text in ours.values()), sum(not text for text in theirs["texts"].values())
    print(f"{len(pages)} pages of {args.data}")
    print(f"empty texts: beamtrove {empty[0]}, DataTrove {empty[1]}")
    print(f"identical texts: {len(pages) - len(different)}, different: {len(different)}")
    columns = ["pages", "identical texts", "different", "empty: beamtrove", "empty: DataTrove", "DataTrove's run kept"]
    row = [len(pages), len(pages) - len(different), len(different), *empty, len(theirs["kept"])]
    results.table("ReadabilityInscriptis texts against DataTrove's", columns, [row])
    results.check("every text identical to DataTrove's", not different)
    run = f"DataTrove's run ({theirs['timeout']} s wall-clock per page): kept {len(theirs['kept'])}, {theirs['stats']}"
    print(f"\n{results.note(run)}")
    for page_id in different[: args.show]:
        mine, datatrove = ours[page_id], theirs["texts"][page_id]
        print(f"\n{page_id}: beamtrove {len(mine)} characters, DataTrove {len(datatrove)}")
        lines = difflib.unified_diff(datatrove.splitlines(), mine.splitlines(), "DataTrove", "beamtrove", n=0)
        print("\n".join(list(lines)[:12]))
    results.write()


if __name__ == "__main__":
    main()
