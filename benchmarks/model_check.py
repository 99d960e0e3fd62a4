"""What checking a fastText model before fastText loads it costs, and checking the asset cache by digest.

Every fastText model a run loads (``--lid_model``, ``--classifier_model``) is first walked part by part
(``fasttext_model_problem``): fastText's loader crashes on a file cut short, or reads it as garbage. This times
that walk against fastText's own load of the same file, best of ``--repeat`` in this process, on
``../shared``'s lid.176.ftz and on a classifier ``train_classifier`` trains on the article benchmark's gold
texts (``--dim`` and ``--bucket`` as given: the dense ``.bin`` and its quantized ``.ftz``). Then it times
``asset_state`` on a cache fetched from ``../shared``: as fetched (each file's size and mtime as recorded, so
none is read), and after a ``touch`` of every file (each one hashed).

    python -m benchmarks.model_check [--repeat 5] [--dim 100] [--bucket 200000] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable

import fasttext

from beamtrove.assets import asset_state, fetch_assets
from beamtrove.cli.train_classifier import TrainingSettings, train_classifier
from beamtrove.transforms.filters.language import fasttext_model_problem
from benchmarks.common import ARTICLES, LID_MODEL, MIB, URL_BLOCKLIST, Results, add_workdir_arguments, argument_parser


def _best_ms(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="timings per file; the best is shown")
    parser.add_argument("--dim", type=int, default=100, help="the trained classifier's dimension")
    parser.add_argument("--bucket", type=int, default=200_000, help="the trained classifier's n-gram buckets")
    add_workdir_arguments(parser, "beamtrove-model-check")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    if not (LID_MODEL.exists() and URL_BLOCKLIST.exists() and ARTICLES.exists()):
        sys.exit("../shared's lid.176.ftz, UT1 lists or article benchmark is absent: keep ../shared beside the repo")
    work = args.workdir / "model-check"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    articles = sorted(json.loads((ARTICLES / "ground-truth.json").read_text()).items())
    texts = [article["articleBody"] for _, article in articles]
    trained, quantized = work / "classifier.bin", work / "classifier.ftz"
    settings = TrainingSettings(dim=args.dim, bucket=args.bucket, epoch=5)
    train_classifier(texts[1::2], texts[::2], trained, settings, quantized)

    rows = []
    for path in (LID_MODEL, trained, quantized):
        problem = fasttext_model_problem(str(path))
        if problem is not None:
            sys.exit(f"{path}: {problem}")
        check = _best_ms(lambda path=path: fasttext_model_problem(str(path)), args.repeat)
        load = _best_ms(lambda path=path: fasttext.load_model(str(path)), args.repeat)
        size = f"{os.path.getsize(path) / MIB:.1f}"
        rows.append([path.name, size, f"{check:.2f}", f"{load:.1f}", f"{check / load:.1%}"])
    columns = ["model", "MiB", "check ms", "fastText load ms", "check / load"]
    print(results.table("Checking a model before fastText loads it (best of --repeat)", columns, rows))

    cache = work / "assets"
    fetch_assets(["lid176"], LID_MODEL.parent, cache)
    fetch_assets(["ut1"], URL_BLOCKLIST, cache)
    rows = []
    for name in ("lid176", "ut1"):
        fetched = _best_ms(lambda name=name: asset_state(name, cache), args.repeat)
        for file in (cache / name).iterdir():
            file.touch()
        touched = _best_ms(lambda name=name: asset_state(name, cache), args.repeat)
        rows.append([name, asset_state(name, cache), f"{fetched:.2f}", f"{touched:.1f}"])
    columns = ["asset", "state", "as fetched ms", "after touch ms (every file hashed)"]
    print("\n" + results.table("Checking the asset cache by digest (best of --repeat)", columns, rows))
    results.write()


if __name__ == "__main__":
    main()
