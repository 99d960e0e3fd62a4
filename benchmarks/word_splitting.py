"""CPU time per MB of word splitting and of the FineWeb filters, on runs of marks, English and CJK.

beamtrove 0.12.1 split a run of marks in time growing with the square of its
length (one record of 20,000 ``*`` took 30 s in gopher_quality); the splitter
is linear now. For each kind of text (runs of ``*``, of ``!?.,;`` and of mixed
marks; English words from the State of the Union addresses; Chinese and
Japanese from the UDHR) and each size of ``--sizes``, prints the CPU time of
``split_words`` alone, of the FineWeb quality filters as the fineweb pipeline
chains them (Gopher repetition, Gopher quality, C4 quality, FineWeb quality on
a Document, a drop ending the chain) and of each filter on its own (the sum),
per MB, and the growth between the smallest and the largest size (10x the
input: linear is ~10x, quadratic ~100x).

With ``--before CHECKOUT`` (a worktree of an earlier beamtrove, e.g.
``git worktree add /tmp/before v0.12.1``), the same figures for that code, in
a child process, on ``--before_sizes`` (small: the old splitter would take a
day on a megabyte of marks).

Then the cost of the CPU-time limit every filter step runs under, on real
documents (the 2,000 movie reviews and the inaugural addresses, through the
four filters): CPU time per document bare, under the limit (a watchdog thread
reads each thread's CPU clock), and, for comparison, in a child process as
extraction runs (its round trip per document).

Usage:
    python -m benchmarks.word_splitting [--sizes 100000 1000000] [--before CHECKOUT]
        [--before_sizes 2000 4000 8000] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys
import time
import zipfile

# No beamtrove at the top: the code measured may be an earlier checkout's, imported after this module.
from benchmarks.common import NLTK_CORPORA, REPOSITORY, Results, add_workdir_arguments, argument_parser, nltk_texts

_MIXED_MARKS = "*!?.,;:-_=#$%&()[]{}<>'\"…/+~^|@"
_KINDS = ("*", "!?.,;", "mixed marks", "English", "CJK")


def _text(kind: str, size: int) -> str:
    """``size`` characters of ``kind``."""
    if kind == "mixed marks":
        rng = random.Random(1)
        return "".join(rng.choice(_MIXED_MARKS) for _ in range(size))
    if kind == "English":
        source = "\n\n".join(nltk_texts("state_union"))
    elif kind == "CJK":
        with zipfile.ZipFile(NLTK_CORPORA / "udhr2.zip") as archive:
            source = "\n".join(
                archive.read(f"udhr2/{language}.txt").decode("utf-8") for language in ("cmn_hans", "cmn_hant", "jpn")
            )
    else:
        source = kind
    return (source * (size // len(source) + 1))[:size]


def _fineweb_filters():
    from beamtrove.transforms.filters import (  # noqa: PLC0415 - the code under test may be an earlier checkout's
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    # As the fineweb pipeline configures them (FineWeb kept lines without terminal punctuation).
    return [
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(filter_no_terminal_punct=False),
        FineWebQualityFilter(),
    ]


def _cpu(function, *args) -> float:
    started = time.process_time()
    function(*args)
    return time.process_time() - started


def measure(sizes: list[int]) -> dict[str, dict[int, tuple[float, float, float]]]:
    """``{kind: {size: (split, chained, each on its own)}}``, CPU seconds per MB."""
    from beamtrove import text  # noqa: PLC0415 - the code under test may be an earlier checkout's
    from beamtrove.document import Document  # noqa: PLC0415
    from beamtrove.transforms.filters import Drop  # noqa: PLC0415

    filters = _fineweb_filters()

    def chained(document):
        for rule in filters:
            if isinstance(rule.filter(document), Drop):
                return

    def each(document):
        for rule in filters:
            text._split_cached.cache_clear()
            rule.filter(document)

    figures = {}
    for kind in _KINDS:
        figures[kind] = {}
        for size in sizes:
            document = Document(text=_text(kind, size), id=f"{kind}-{size}")
            per_mb = 1e6 / len(document.text.encode("utf-8"))
            text._split_cached.cache_clear()
            split = _cpu(text.split_words, document.text)
            text._split_cached.cache_clear()
            chain = _cpu(chained, document)
            alone = _cpu(each, document)
            figures[kind][size] = (split * per_mb, chain * per_mb, alone * per_mb)
    return figures


def _measure_before(checkout: pathlib.Path, sizes: list[int]) -> dict:
    # This file, run with the earlier checkout's beamtrove (whose benchmarks folder lacks it and the shared helpers,
    # imported first from this checkout).
    script = (
        f"import importlib.util, json, sys; sys.path.insert(0, {str(REPOSITORY)!r}); import benchmarks.common; "
        f"sys.path.insert(0, {str(checkout)!r}); import beamtrove; "
        f"assert beamtrove.__file__.startswith({str(checkout)!r}), beamtrove.__file__; "
        f"spec = importlib.util.spec_from_file_location('word_splitting', {__file__!r}); "
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
        f"print(json.dumps(module.measure({sizes!r})))"
    )
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd="/")
    if output.returncode:
        raise RuntimeError(f"measuring {checkout} failed:\n{output.stderr}")
    figures = json.loads(output.stdout)
    return {kind: {int(size): tuple(row) for size, row in rows.items()} for kind, rows in figures.items()}


def _print_figures(results: Results, title: str, figures: dict) -> None:
    sizes = sorted(next(iter(figures.values())))
    # Per MB figures: the total grows by the size ratio times the per-MB ratio.
    ratio = sizes[-1] / sizes[0]
    rows = []
    for kind, by_size in figures.items():
        small, large = by_size[sizes[0]], by_size[sizes[-1]]
        growth = "/".join(f"{ratio * large[i] / max(small[i], 1e-9):.0f}x" for i in range(3))
        rows.append([kind, *(" / ".join(f"{figure:.3f}" for figure in by_size[size]) for size in sizes), growth])
    title = f"{title}: CPU seconds per MB (split alone / FineWeb filters chained / each filter on its own)"
    print(f"\n{title}\n{results.table(title, ['text', *(f'{size:,} characters' for size in sizes), 'growth'], rows)}")
    print(f"(growth: total CPU time from {sizes[0]:,} to {sizes[-1]:,} characters; linear is ~{ratio:.0f}x)")


class _StackOnText:
    """The FineWeb filters as an extractor, to time a child process's round trip per document."""

    name = "fineweb_filters"

    def setup(self) -> None:
        self._filters = _fineweb_filters()

    def extract(self, html: str) -> str:
        from beamtrove.document import Document  # noqa: PLC0415

        document = Document(text=html, id="d")
        for rule in self._filters:
            rule.filter(document)
        return html


def _guard_overhead(results: Results) -> None:
    from beamtrove.document import Document  # noqa: PLC0415
    from beamtrove.transforms.cpu_time import CpuTimeLimit  # noqa: PLC0415
    from beamtrove.transforms.extractors.base import _Sandbox  # noqa: PLC0415
    from beamtrove.transforms.filters.base import DEFAULT_STEP_TIMEOUT  # noqa: PLC0415

    texts = nltk_texts("movie_reviews") + nltk_texts("inaugural")
    documents = [Document(text=text, id=str(number)) for number, text in enumerate(texts)]
    filters = _fineweb_filters()
    limit = CpuTimeLimit(DEFAULT_STEP_TIMEOUT)

    def bare():
        for document in documents:
            for rule in filters:
                rule.filter(document)

    def limited():
        for document in documents:
            for rule in filters:
                limit.run(rule.filter, document)

    for _ in range(2):  # warm caches once, then measure
        bare_cpu, limited_cpu = _cpu(bare), _cpu(limited)
    per_document = 1e6 / len(documents)
    extra = (limited_cpu - bare_cpu) * per_document
    print(f"\nCPU-time limit on the four FineWeb filters, {len(documents)} real documents (movie reviews, inaugurals):")
    print(f"  bare {bare_cpu * per_document:.0f} us/document, under the limit {limited_cpu * per_document:.0f}")
    print(f"  -> {extra:.1f} us/document for 4 steps ({100 * extra / (bare_cpu * per_document):.1f}%)")
    results.note(
        f"CPU-time limit on the four FineWeb filters, {len(documents)} real documents: bare "
        f"{bare_cpu * per_document:.0f} us/document, under the limit {limited_cpu * per_document:.0f} "
        f"({extra:.1f} us/document for 4 steps, {100 * extra / (bare_cpu * per_document):.1f}%)"
    )
    sandbox = _Sandbox(_StackOnText(), DEFAULT_STEP_TIMEOUT)
    try:
        sandbox.extract("warm up")
        started = time.perf_counter()
        for document in documents[:500]:
            sandbox.extract(document.text)
        child_wall = (time.perf_counter() - started) / 500
    finally:
        sandbox.close()
    started = time.perf_counter()
    for document in documents[:500]:
        for rule in filters:
            rule.filter(document)
    own_wall = (time.perf_counter() - started) / 500
    child = (
        f"in a child process as extraction runs, wall time per document: {child_wall * 1e6:.0f} us against "
        f"{own_wall * 1e6:.0f} us in the worker (one round trip for all 4 steps; loaded machines add more)"
    )
    print(f"  {results.note(child)}")


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--before", type=pathlib.Path, help="a checkout of an earlier beamtrove to measure too")
    parser.add_argument("--before_sizes", type=int, nargs="+", default=[2_000, 4_000, 8_000])
    add_workdir_arguments(parser, "beamtrove-word-splitting")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    import beamtrove  # noqa: PLC0415

    print(f"beamtrove {beamtrove.__version__} from {pathlib.Path(beamtrove.__file__).parent}, pid {os.getpid()}")
    if args.before:
        before = _measure_before(args.before.resolve(), args.before_sizes)
        _print_figures(results, f"before ({args.before})", before)
        _print_figures(results, "now, same sizes", measure(args.before_sizes))
    _print_figures(results, "now", measure(args.sizes))
    _guard_overhead(results)
    results.write()


if __name__ == "__main__":
    main()
