"""Extraction quality and speed of Trafilatura, Resiliparse and ReadabilityInscriptis.

Runs the three extractors, with beamtrove's defaults, on the 181 real article
pages of ../shared/data/article-extraction-benchmark and scores each page's
text against its gold ``articleBody``:

* Token precision, recall and F1 per page, on bags of word tokens: the text is
  lowercased and split into ``\\w+`` runs, and the overlap is the multiset
  intersection of the two bags. This is the bag-of-words methodology that the
  benchmark's own evaluation cites (Moz's content-extraction benchmark); the
  per-page scores are summarised by their mean and median over the pages. A
  page with an empty extraction scores 0.
* For reference, the mean per-page F1 on bags of 4-token shingles (case
  kept), the unit that the benchmark's own evaluation script counts. It is
  stricter about word order and boilerplate runs.

Speed is documents per second of ``extract`` called in a plain loop in this
one process, after ``setup`` and one warm-up pass, best of ``--repeats``
passes; the extractors run in the same invocation, so the ratios compare
them on the same machine and load. Extraction runs in the benchmark process,
not through the ``Extract`` transform's sandbox, so the figures are the
extractors' own costs.

Usage:
    python -m benchmarks.extraction_quality [--data DIR] [--repeats 3] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import collections
import pathlib
import re
import statistics
import sys
import time

from beamtrove.transforms.extractors import Extractor, ReadabilityInscriptis, Resiliparse, Trafilatura
from benchmarks.common import ARTICLES, Results, add_workdir_arguments, argument_parser, article_pages

WORD = re.compile(r"\w+")


def words(text: str) -> collections.Counter:
    """The bag of lowercased word tokens of ``text``."""
    return collections.Counter(WORD.findall(text.lower()))


def shingles(text: str, size: int = 4) -> collections.Counter:
    """The bag of runs of ``size`` consecutive word tokens, case kept."""
    tokens = WORD.findall(text)
    return collections.Counter(tuple(tokens[i : i + size]) for i in range(max(1, len(tokens) - size + 1)))


def scores(gold: collections.Counter, predicted: collections.Counter) -> tuple[float, float, float]:
    """Precision, recall and F1 of ``predicted`` against ``gold``."""
    overlap = sum((gold & predicted).values())
    if not overlap:
        return 0.0, 0.0, 0.0
    precision = overlap / sum(predicted.values())
    recall = overlap / sum(gold.values())
    return precision, recall, 2 * precision * recall / (precision + recall)


def best_pass_seconds(extractor: Extractor, htmls: list[str], repeats: int) -> float:
    """Seconds of the fastest of ``repeats`` loops of ``extract`` over ``htmls``."""
    fastest = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for html in htmls:
            extractor.extract(html)
        fastest = min(fastest, time.perf_counter() - start)
    return fastest


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--data", type=pathlib.Path, default=ARTICLES, help="the article-extraction-benchmark folder")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per extractor; the fastest counts")
    add_workdir_arguments(parser, "beamtrove-extraction-quality")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    if not (args.data / "ground-truth.json").exists():
        sys.exit(f"{args.data} is absent: pass --data DIR or keep ../shared beside the checkout")

    pages = list(article_pages(args.data).values())
    htmls = [html for html, _ in pages]
    print(results.note(f"{len(pages)} pages, {sum(len(html) for html in htmls) / 1e6:.1f} M characters of HTML"))

    rows, speed = [], {}
    for extractor in (Trafilatura(), Resiliparse(), ReadabilityInscriptis()):
        extractor.setup()
        texts = [extractor.extract(html) for html in htmls]  # also the warm-up pass
        per_page = [scores(words(gold), words(text)) for (_, gold), text in zip(pages, texts, strict=True)]
        shingle_f1 = [scores(shingles(gold), shingles(text))[2] for (_, gold), text in zip(pages, texts, strict=True)]
        speed[extractor.name] = len(htmls) / best_pass_seconds(extractor, htmls, args.repeats)
        precision, recall, f1 = zip(*per_page, strict=True)
        rows.append(
            [
                extractor.name,
                *(
                    f"{summary(values):.3f}"
                    for values in (precision, recall, f1)
                    for summary in (statistics.mean, statistics.median)
                ),
                f"{statistics.mean(shingle_f1):.3f}",
                sum(not text for text in texts),
                f"{speed[extractor.name]:.1f}",
            ]
        )
    columns = ["extractor", "P mean", "P median", "R mean", "R median", "F1 mean", "F1 median", "4-gram F1 mean"]
    print()
    print(results.table("Token precision, recall and F1 against the gold texts", [*columns, "empty", "docs/s"], rows))
    print()
    for name in ("resiliparse", "readability"):
        print(results.note(f"speed ratio {name}/trafilatura: {speed[name] / speed['trafilatura']:.1f}x"))
    results.write()


if __name__ == "__main__":
    main()
