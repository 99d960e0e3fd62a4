"""Memory and load time of the URL filter with the full UT1 lists, beamtrove against DataTrove 0.10.1.

Each tool loads its URL filter in a fresh process (DataTrove's in its own
venv) and reports the resident memory the loaded lists add (VmRSS after
loading minus VmRSS after imports), the process's peak resident memory
(VmHWM), the load time, and the time per URL to judge the 181 real URLs of
the article-extraction-benchmark plus listed domains. beamtrove's filter
holds 4.56 M domains as sorted 64-bit hashes and loads once per worker
process; DataTrove's holds them as a set of strings in every task.

Usage:
    python -m benchmarks.url_filter_memory [--blocklist DIR] [--datatrove_venv PATH] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import pathlib
import sys

from benchmarks.common import (
    ARTICLES,
    MIB,
    URL_BLOCKLIST,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    json_output,
    verdict,
)

GROUND_TRUTH = ARTICLES / "ground-truth.json"
LISTS_GOAL = 150 * MIB

# Runs in a fresh interpreter of either tool; argv: tool, blocklist dir, ground-truth.json.
_PROBE = r"""
import json, sys, time

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

tool, blocklist, truth = sys.argv[1:4]
urls = [page["url"] for page in json.load(open(truth)).values()]
urls += ["http://0-1avsex.com/", "https://www.0-1avsex.com/videos", "http://010206upi.blogspot.al/"]
if tool == "beamtrove":
    from beamtrove.document import Document
    from beamtrove.transforms.filters import Drop, URLFilter
    rule = URLFilter(blocklist)
    documents = [Document(text="", id=str(i), metadata={"url": url}) for i, url in enumerate(urls)]
    before = status("VmRSS")
    start = time.perf_counter()
    rule.setup()
    loaded = time.perf_counter() - start
    judge = lambda: [not isinstance(rule.filter(d), Drop) for d in documents]
else:
    from datatrove.data import Document
    from datatrove.pipeline.filters import URLFilter
    rule = URLFilter()
    documents = [Document(text="", id=str(i), metadata={"url": url}) for i, url in enumerate(urls)]
    before = status("VmRSS")
    start = time.perf_counter()
    rule.download_data()
    loaded = time.perf_counter() - start
    judge = lambda: [rule.filter(d) is True for d in documents]
after = status("VmRSS")
start = time.perf_counter()
for _ in range(20):
    kept = judge()
per_url = (time.perf_counter() - start) / (20 * len(documents))
print(json.dumps({"lists_rss": after - before, "peak_rss": status("VmHWM"), "load_s": loaded,
                  "per_url_us": per_url * 1e6, "kept": sum(kept), "urls": len(documents)}))
"""


def _probe(python: pathlib.Path, tool: str, blocklist: pathlib.Path) -> dict:
    return json_output([python, "-c", _PROBE, tool, blocklist, GROUND_TRUTH])


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--blocklist", type=pathlib.Path, default=URL_BLOCKLIST, help="UT1 folder for beamtrove")
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-url-filter-memory")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    if not args.blocklist.exists() or not GROUND_TRUTH.exists():
        sys.exit(f"{args.blocklist} or {GROUND_TRUTH} is absent: keep ../shared beside the checkout")
    ours = _probe(pathlib.Path(sys.executable), "beamtrove", args.blocklist)
    theirs = _probe(datatrove_python(args.datatrove_venv), "datatrove", args.blocklist)
    rows = [
        [
            name,
            f"{row['lists_rss'] / MIB:.0f}",
            f"{row['peak_rss'] / MIB:.0f}",
            f"{row['load_s']:.1f}",
            f"{row['per_url_us']:.1f}",
            f"{row['kept']}/{row['urls']}",
        ]
        for name, row in (("beamtrove", ours), ("DataTrove 0.10.1", theirs))
    ]
    columns = ["tool", "lists resident (MiB)", "process peak RSS (MiB)", "load s", "µs per URL", "kept"]
    print(results.table("The URL filter with the full UT1 lists", columns, rows))
    ratio = theirs["lists_rss"] / ours["lists_rss"]
    print(f"\n{results.note(f'lists memory ratio DataTrove/beamtrove: {ratio:.1f}x')}")
    passed = results.check("beamtrove's lists under 150 MiB", ours["lists_rss"] < LISTS_GOAL)
    print(f"goal: beamtrove's lists under 150 MiB: {verdict(passed)}")
    results.write()


if __name__ == "__main__":
    main()
