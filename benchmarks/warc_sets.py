"""WARC sets built from the real pages in ../shared/data with make_warc.py, cached per work directory."""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import tempfile

__all__ = ["MAKE_WARC", "SHARED", "add_warc_set_arguments", "warc_set", "warc_set_of"]

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


def add_warc_set_arguments(parser: argparse.ArgumentParser, *, records: int, files: int, workdir_name: str) -> None:
    """Adds ``--records``, ``--files``, ``--seed`` and ``--workdir`` (default ``$TMPDIR/<workdir_name>``)."""
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--files", type=int, default=files)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()) / workdir_name)


def warc_set_of(args: argparse.Namespace) -> tuple[pathlib.Path, pathlib.Path]:
    """The work directory the arguments name (created) and their WARC set in it."""
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir, warc_set(workdir, args.records, args.files, args.seed)
