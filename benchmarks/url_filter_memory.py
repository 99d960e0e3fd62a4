"""Memory and load time of the URL filter with the full UT1 lists, beamtrove against DataTrove 0.10.1.

Each tool loads its URL filter in a fresh process (DataTrove's in its own
venv) and reports the resident memory the loaded lists add (VmRSS after
loading minus VmRSS after imports), the process's peak resident memory
(VmHWM), the load time, and the time per URL to judge the 181 real URLs of
the article-extraction-benchmark plus listed domains. beamtrove's filter
holds 4.56 M domains as sorted 64-bit hashes and loads once per worker
process; DataTrove's holds them as a set of strings in every task.

Usage:
    python -m benchmarks.url_filter_memory [--blocklist DIR] [--datatrove-venv PATH]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

from benchmarks.datatrove_env import DEFAULT_VENV, datatrove_python

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
BLOCKLIST = SHARED / "data" / "blocklists" / "ut1"
GROUND_TRUTH = SHARED / "data" / "article-extraction-benchmark" / "ground-truth.json"

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


def _probe(python: str, tool: str, blocklist: pathlib.Path) -> dict:
    result = subprocess.run(
        [python, "-c", _PROBE, tool, str(blocklist), str(GROUND_TRUTH)], check=True, capture_output=True, text=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocklist", type=pathlib.Path, default=BLOCKLIST, help="UT1 folder for beamtrove")
    parser.add_argument("--datatrove-venv", type=pathlib.Path, default=DEFAULT_VENV)
    args = parser.parse_args()
    if not args.blocklist.exists() or not GROUND_TRUTH.exists():
        sys.exit(f"{args.blocklist} or {GROUND_TRUTH} is absent: keep ../shared beside the checkout")
    ours = _probe(sys.executable, "beamtrove", args.blocklist)
    theirs = _probe(str(datatrove_python(args.datatrove_venv)), "datatrove", args.blocklist)
    mib = 1 << 20
    print("| tool | lists resident (MiB) | process peak RSS (MiB) | load s | µs per URL | kept |")
    print("|---|---|---|---|---|---|")
    for name, row in (("beamtrove", ours), ("DataTrove 0.10.1", theirs)):
        print(
            f"| {name} | {row['lists_rss'] / mib:.0f} | {row['peak_rss'] / mib:.0f} | {row['load_s']:.1f} | "
            f"{row['per_url_us']:.1f} | {row['kept']}/{row['urls']} |"
        )
    print(f"\nlists memory ratio DataTrove/beamtrove: {theirs['lists_rss'] / ours['lists_rss']:.1f}x")
    print(f"goal: beamtrove's lists under 150 MiB: {'PASS' if ours['lists_rss'] < 150 * mib else 'FAIL'}")


if __name__ == "__main__":
    main()
