"""WARC sets built from the real pages in ../shared/data with make_warc.py, cached per work directory."""

from __future__ import annotations

import pathlib
import subprocess
import sys

__all__ = ["MAKE_WARC", "SHARED", "warc_set"]

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
MAKE_WARC = SHARED / "tools" / "make_warc.py"


def warc_set(workdir: pathlib.Path, records: int, files: int, seed: int) -> pathlib.Path:
    """``<workdir>/warc-r<records>-f<files>-s<seed>``, built by make_warc.py unless it is already there."""
    warc_dir = workdir / f"warc-r{records}-f{files}-s{seed}"
    if not (warc_dir / "manifest.jsonl").exists():
        print(f"building {warc_dir}", file=sys.stderr)
        command = [sys.executable, str(MAKE_WARC), str(warc_dir), "--records", str(records), "--files", str(files)]
        subprocess.run([*command, "--seed", str(seed)], check=True)
    return warc_dir
