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
    python -m benchmarks.extraction_quality [--data DIR] [--repeats 3]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import pathlib
import re
import statistics
import sys
import time

from beamtrove.transforms.extractors import Extractor, ReadabilityInscriptis, Resiliparse, Trafilatura

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "article-extraction-benchmark"
WORD = re.compile(r"\w+")


def load_pages(root: pathlib.Path) -> list[tuple[str, str]]:
    """Returns ``(html, gold text)`` per page, in page-id order."""
    gold = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    return [
        (
            gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes()).decode("utf-8", "replace"),
            gold[key]["articleBody"],
        )
        for key in sorted(gold)
    ]


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=pathlib.Path, default=DATA, help="the article-extraction-benchmark folder")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per extractor; the fastest counts")
    args = parser.parse_args()
    if not (args.data / "ground-truth.json").exists():
        sys.exit(f"{args.data} is absent: pass --data DIR or keep ../shared beside the checkout")

    pages = load_pages(args.data)
    htmls = [html for html, _ in pages]
    print(f"{len(pages)} pages, {sum(len(html) for html in htmls) / 1e6:.1f} M characters of HTML")

    rows = []
    for extractor in (Trafilatura(), Resiliparse(), ReadabilityInscriptis()):
        extractor.setup()
        texts = [extractor.extract(html) for html in htmls]  # also the warm-up pass
        per_page = [scores(words(gold), words(text)) for (_, gold), text in zip(pages, texts, strict=True)]
        shingle_f1 = [scores(shingles(gold), shingles(text))[2] for (_, gold), text in zip(pages, texts, strict=True)]
        seconds = best_pass_seconds(extractor, htmls, args.repeats)
        precision, recall, f1 = zip(*per_page, strict=True)
        rows.append(
            {
                "name": extractor.name,
                "empty": sum(not text for text in texts),
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "shingle_f1": statistics.mean(shingle_f1),
                "docs_per_s": len(htmls) / seconds,
            }
        )

    print()
    print(
        "| extractor | P mean | P median | R mean | R median | F1 mean | F1 median | 4-gram F1 mean | empty | docs/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['name']} "
            f"| {statistics.mean(row['precision']):.3f} | {statistics.median(row['precision']):.3f} "
            f"| {statistics.mean(row['recall']):.3f} | {statistics.median(row['recall']):.3f} "
            f"| {statistics.mean(row['f1']):.3f} | {statistics.median(row['f1']):.3f} "
            f"| {row['shingle_f1']:.3f} | {row['empty']} | {row['docs_per_s']:.1f} |"
        )
    speed = {row["name"]: row["docs_per_s"] for row in rows}
    print()
    for name in ("resiliparse", "readability"):
        print(f"speed ratio {name}/trafilatura: {speed[name] / speed['trafilatura']:.1f}x")


if __name__ == "__main__":
    main()
