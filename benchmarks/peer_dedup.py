"""Staged dedup against text-dedup 0.4.1 (MinHash) and dolma 1.2.1 (Bloom): the same documents, back to back.

A make_warc.py set (real pages plus exact and near copies) is extracted once
with resiliparse and split into 4 JSONL files
(:func:`benchmarks.dedup_inputs.split_documents`, 16 WARC files); with
``--single_file`` the same documents are also concatenated into one
``.jsonl.gz`` (built once), and every run is repeated on it. On each, in
this order, every run measured alone (wall time, peak PSS of its process
tree and of its largest process):

MinHash (``--only minhash``):

1. ``beamtrove run dedup --dedup minhash --staged --workers W --memory M``,
   beamtrove's defaults otherwise (5-word shingles, 14 buckets of 8 hashes).
2. DataTrove 0.10.1's four MinHash stages at its defaults, 4 tasks
   (:func:`benchmarks.dedup_inputs.datatrove_minhash_command`); on the single
   file only its first task has a file to read.
3. ``python -m text_dedup.minhash`` of text-dedup 0.4.1, in a Python 3.12
   venv of its own (0.4.1 requires 3.12). Its settings are pydantic models
   given as JSON on the command line: the input (``local_files``, the JSONL
   files loaded by ``datasets``' ``json`` builder, split ``train``),
   ``output_dir``, an empty ``debug`` (required, though all its fields have
   defaults), and the algorithm as the MinHash configuration of its README's
   quick start sets it, with ``text_column = "text"`` and ``num_proc = W``
   (its default is every core): ``num_perm = 240``, ``threshold = 0.7``,
   ``ngram_size = 5`` (word 5-grams of the lower-cased ``\\W``-separated
   words), ``check_false_positive = true`` (pairs of a cluster verified by
   their exact Jaccard), seed 42, 64-bit mode. Its code alone would not do:
   it has no default for ``num_perm`` and ``threshold``, and with its
   defaults for the other two (``ngram_size = 1``: sets of words; no
   verification) it keeps 1 of the 10,095 documents of 10,200 records (all
   10,077 it dedups fall in 1,207 clusters; unverified, a document stays
   when its index equals its cluster's label, and the labels polars-grouper
   gives are not member indices: 1 of 1,207 is), then fails to save one row
   with ``num_proc = 2``. The rest is its code's: bands and rows from its optimiser,
   xxh3 hashes, ``min_length = 5`` (documents of fewer than 5 words are
   dropped from its output before dedup: they count as removed here, and
   the number it logs is printed). ``datasets`` caches in a fresh folder of
   the work directory for each run, so no run reuses another's Arrow files.
   What it removed: the input ids missing from the dataset it saves with
   ``save_to_disk`` (read with ``datasets.load_from_disk`` in its venv).

Bloom (``--only bloom``):

4. ``beamtrove run dedup --dedup bloom --staged --workers W --memory M``,
   beamtrove's defaults otherwise: a document is removed when more than 0.8
   of its 13-word shingle occurrences occur in a document earlier in the
   keep order; the filter only narrows the exact search (fpr 0.01 for 10
   million expected shingles).
5. ``dolma -c CONFIG dedupe`` of dolma 1.2.1 (its Rust deduper), in a venv
   of its own, on a copy of the documents laid out as dolma reads them
   (``documents/*.jsonl.gz`` with ``id``, ``text`` and ``source``, written
   once). It is set to do what our bloom step does: paragraph dedup by
   n-gram overlap (``dedupe.paragraphs.by_ngram``) with a paragraph
   separator that occurs in no text (checked while converting), so that a
   document is one paragraph; ``ngram_length = 13``, ``stride = 0`` (every
   n-gram), ``overlap_threshold = 0.8``, and ``skip_short_paragraphs = true``
   (without it dolma compares a document of fewer than 14 words as a whole
   string; with it, a document without a 13-gram is never a duplicate, as in
   ours). Its filter is sized from our filter's figures:
   ``estimated_doc_count`` = 10 million (it counts inserted keys, i.e.
   n-grams) and ``desired_false_positive_rate`` = 0.01, which dolma makes
   16 MiB with 10 hashes (it doubles from 1 MiB and rounds up; ours: 11.4
   MiB, 7); ``read_only = false``, a fresh filter file each run;
   ``processes = W`` (threads). What it removed: the documents whose
   ``attributes/<name>/*.jsonl.gz`` row holds a span, which covers the whole
   text as there is one paragraph (a span that does not is an error), and
   which dolma writes only when the overlap reached 0.8. Left as they differ: dolma's words are Unicode
   word boundaries with punctuation kept and case kept (ours: normalized
   text), its fraction counts an n-gram repeated inside the document (ours:
   only n-grams of earlier documents), ``>= 0.8`` (ours ``> 0.8``), and its
   "earlier" is whatever order its threads reach the documents in; its
   false positives count as repeats.

For each pair it prints a table (wall, peak tree PSS, largest process, removed,
and per peer: its wall and tree PSS over ours, the symmetric difference of
the removed sets, that as a fraction of the peer's removed count, how many of
those differing documents have a text of which both keep as many copies
(each tool keeps another copy of a cluster: ours the smallest id, the peers
the first they reach), and the kept-set Jaccard), and checks the goals:
staged MinHash at least 5x DataTrove's speed with a tree peak PSS at most 2x
DataTrove's; at least 1.5x text-dedup's speed with a tree peak PSS at most
text-dedup's; staged bloom's wall at most 1.5x dolma's. A missed goal is reported, not an error: the
script exits non-zero only when a run fails or an output cannot be read. A peer still
running after ``--peer_limit`` seconds is killed and reported unfinished, with its
time and memory until then as bounds of the ratios.

Usage:
    python -m benchmarks.peer_dedup [--records 102000] [--workers 2] [--memory BYTES] [--single_file]
        [--datatrove_split_only] [--only minhash|bloom] [--peer_limit SECONDS] [--workdir DIR] [--results FILE]
        [--datatrove_venv DIR] [--text_dedup_venv DIR] [--dolma_venv DIR] [--python312 PATH]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import gzip
import hashlib
import json
import pathlib
import re
import shlex
import shutil
import sys
from collections.abc import Iterator

from beamtrove.transforms.dedup.bloom_filter import BloomDedupConfig
from benchmarks.common import (
    DEFAULT_VENV,
    GIB,
    Results,
    TreeMonitor,
    Unfinished,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    jaccard,
    json_output,
    jsonl_rows,
    pinned_python,
    run_measured,
    verdict,
)
from benchmarks.dedup_inputs import datatrove_minhash_command, datatrove_removed_ids, excluded_ids, split_documents

__all__ = [
    "DOLMA_ATTRIBUTE",
    "PARAGRAPH_SEPARATOR",
    "dolma_command",
    "dolma_documents",
    "dolma_removed_ids",
    "single_file",
    "text_dedup_command",
    "text_dedup_kept_ids",
]

TEXT_DEDUP = "text-dedup==0.4.1"
DOLMA = "dolma==1.2.1"
TEXT_DEDUP_VENV = DEFAULT_VENV.parent / "text-dedup-0.4.1-venv"
DOLMA_VENV = DEFAULT_VENV.parent / "dolma-1.2.1-venv"
# dolma pins s3fs 2023.6.0, whose aiobotocore 2.5.4 pins botocore 1.31.17, and takes any boto3: unpinned, pip
# backtracks through boto3's releases for over ten minutes before it finds the one that fits.
_DOLMA_BOTO3 = "boto3==1.28.17"

# The [algorithm] table of the MinHash configuration in text-dedup 0.4.1's README (its quick start), but for
# text_column and num_proc: its code has no default for num_perm and threshold, and at its code's ngram_size = 1
# without checking false positives it keeps 1 document of make_warc.py's 10,200 records (see the docstring).
_TEXT_DEDUP_MINHASH = {
    "algorithm_name": "minhash",
    "seed": 42,
    "batch_size": 10000,
    "num_perm": 240,
    "threshold": 0.7,
    "false_positive_weight": 0.5,
    "false_negative_weight": 0.5,
    "hash_bits": 64,
    "ngram_size": 5,
    "check_false_positive": True,
}
# What text-dedup logs about the documents its min_length filter dropped before dedup.
_TEXT_DEDUP_FILTERED = re.compile(r"Filtered (\d+) records")

# Splits no document, so that dolma takes each document as one paragraph.
PARAGRAPH_SEPARATOR = "\x1e\x1d beamtrove: one paragraph \x1d\x1e"
DOLMA_ATTRIBUTE = "bloom_duplicate"
_DOLMA_SOURCE = "make_warc"

# beamtrove's bloom defaults, which dolma is set to follow.
_BLOOM = BloomDedupConfig()

# The goals: staged MinHash's speed and tree peak PSS against DataTrove's and text-dedup's (speed at least, memory at
# most so many times the peer's), and staged bloom's wall at most so many times dolma's.
_MINHASH_GOALS = {"DataTrove": (5.0, 2.0), "text-dedup": (1.5, 1.0)}
_DOLMA_WALL_GOAL = 1.5


# --------------------------------------------------------------------------- inputs


def single_file(source: pathlib.Path) -> pathlib.Path:
    """A folder beside ``source`` holding all its documents in one ``all.jsonl.gz``, built once."""
    folder = source.parent / f"{source.name}-single"
    if (folder / "done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    count = 0
    with gzip.open(folder / "all.jsonl.gz", "wt", encoding="utf-8") as out:
        for part in sorted(source.glob("*.jsonl.gz")):
            with gzip.open(part, "rt", encoding="utf-8") as lines:
                for line in lines:
                    out.write(line)
                    count += 1
    (folder / "done").write_text(str(count))
    return folder


def dolma_documents(source: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """``target/documents/``: each ``*.jsonl.gz`` of ``source`` as dolma reads it (id, text, source); built once.

    Raises:
        ValueError: A text holds :data:`PARAGRAPH_SEPARATOR`, so dolma would not see it as one paragraph.
    """
    documents = target / "documents"
    if (target / "done").exists():
        return documents
    shutil.rmtree(target, ignore_errors=True)
    documents.mkdir(parents=True)
    for part in sorted(source.glob("*.jsonl.gz")):
        with gzip.open(documents / part.name, "wt", encoding="utf-8") as out:
            for row in jsonl_rows(part.parent, part.name):
                if PARAGRAPH_SEPARATOR in row["text"]:
                    raise ValueError(f"{row['id']} of {part} holds the paragraph separator: pick another")
                converted = {"id": row["id"], "text": row["text"], "source": _DOLMA_SOURCE}
                out.write(json.dumps(converted, ensure_ascii=False) + "\n")
    (target / "done").touch()
    return documents


def _digests(folder: pathlib.Path) -> dict[str, bytes]:
    """``{id: digest of the text}`` of the documents of ``folder``."""
    return {
        row["id"]: hashlib.blake2b(row["text"].encode("utf-8"), digest_size=16).digest()
        for row in jsonl_rows(folder, "*.jsonl.gz")
    }


# --------------------------------------------------------------------------- text-dedup


def text_dedup_command(
    python: pathlib.Path, source: pathlib.Path, output: pathlib.Path, cache: pathlib.Path, processes: int
) -> list[str]:
    """text-dedup's MinHash on ``source``'s JSONL files as its README sets it, saving the kept documents in ``output``.

    ``cache`` is the ``datasets`` cache of the run (set through ``env``).
    """
    files = [str(path) for path in sorted(source.glob("*.jsonl.gz"))]
    settings = {
        "input": {
            "input_type": "local_files",
            "file_type": "json",
            "read_arguments": {"path": "json", "data_files": files, "split": "train"},
        },
        "algorithm": {**_TEXT_DEDUP_MINHASH, "text_column": "text", "num_proc": processes},
        "output": {"output_dir": str(output)},
        # Required though every field of it has a default.
        "debug": {},
    }
    command = ["env", f"HF_DATASETS_CACHE={cache}", str(python), "-m", "text_dedup.minhash"]
    for name, value in settings.items():
        command += [f"--{name}", json.dumps(value)]
    return command


# Runs in text-dedup's venv: argv = a dataset folder saved by save_to_disk. Prints its ids as JSON.
_SAVED_IDS = """
import json, sys
from datasets import load_from_disk
print(json.dumps(list(load_from_disk(sys.argv[1])["id"])))
"""


def text_dedup_kept_ids(python: pathlib.Path, output: pathlib.Path) -> set[str]:
    """The ids of the documents text-dedup kept: those of the dataset it saved in ``output``."""
    return set(json_output([python, "-c", _SAVED_IDS, output]))


# --------------------------------------------------------------------------- dolma


def dolma_config(documents: pathlib.Path, work: pathlib.Path, processes: int) -> dict:
    """dolma's deduper configuration doing what beamtrove's bloom step does (see the module docstring)."""
    return {
        "documents": [str(documents / "*.jsonl.gz")],
        "dedupe": {
            "name": DOLMA_ATTRIBUTE,
            "paragraphs": {
                "attribute_name": DOLMA_ATTRIBUTE,
                "paragraph_separator": PARAGRAPH_SEPARATOR,
                "by_ngram": {
                    "ngram_length": _BLOOM.n_grams,
                    "stride": 0,
                    "overlap_threshold": _BLOOM.threshold,
                    "skip_short_paragraphs": True,
                },
            },
        },
        "bloom_filter": {
            "file": str(work / "bloom_filter.bin"),
            "read_only": False,
            "estimated_doc_count": _BLOOM.expected_shingles,
            "desired_false_positive_rate": _BLOOM.fpr,
        },
        "work_dir": {"input": str(work / "tmp-input"), "output": str(work / "tmp-output")},
        "processes": processes,
    }


def dolma_command(dolma: pathlib.Path, documents: pathlib.Path, work: pathlib.Path, processes: int) -> list[str]:
    """``dolma -c CONFIG dedupe``, writing CONFIG (:func:`dolma_config`) into ``work``.

    Clears what an earlier run left: dolma loads an existing filter file and
    skips a file whose attributes exist.
    """
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(documents.parent / "attributes" / DOLMA_ATTRIBUTE, ignore_errors=True)
    work.mkdir(parents=True)
    config = work / "dedupe.json"
    config.write_text(json.dumps(dolma_config(documents, work, processes), indent=1))
    return [str(dolma), "-c", str(config), "dedupe"]


def _dolma_rows(documents: pathlib.Path) -> Iterator[tuple[dict, dict]]:
    """Each document of ``documents`` with the row dolma wrote for it, files matched by name, rows by line."""
    attributes = documents.parent / "attributes" / DOLMA_ATTRIBUTE
    for part in sorted(documents.glob("*.jsonl.gz")):
        spans = attributes / part.name
        if not spans.exists():
            raise FileNotFoundError(f"dolma wrote no attributes for {part} (expected {spans})")
        with contextlib.ExitStack() as stack:
            texts = stack.enter_context(gzip.open(part, "rt", encoding="utf-8"))
            marks = stack.enter_context(gzip.open(spans, "rt", encoding="utf-8"))
            for text_line, mark_line in zip(texts, marks, strict=True):
                document, mark = json.loads(text_line), json.loads(mark_line)
                if document["id"] != mark["id"]:
                    raise ValueError(f"{spans} is not line by line {part}: {mark['id']} against {document['id']}")
                yield document, mark


def dolma_removed_ids(documents: pathlib.Path) -> set[str]:
    """The documents of ``documents`` (a dolma ``documents`` folder) that dolma's dedup marked as duplicates.

    A span is ``[start, end, overlap]`` in characters. With the whole text
    one paragraph, a marked document has one span, from 0 to the text's
    length or one past it (dolma counts a separator after the paragraph
    when the text has multi-byte characters).

    Raises:
        FileNotFoundError: An attributes file is missing.
        ValueError: Attributes and documents do not match line by line, or
            a span covers part of a text only: dolma split it into paragraphs.
    """
    removed = set()
    for document, mark in _dolma_rows(documents):
        for start, end, _ in mark["attributes"].get(DOLMA_ATTRIBUTE, []):
            if start != 0 or end < len(document["text"]):
                raise ValueError(f"dolma marked [{start}, {end}) of {document['id']}, not its whole text")
            removed.add(document["id"])
    return removed


# --------------------------------------------------------------------------- runs and comparisons


class _Run:
    """One measured run: its name, wall time, monitor and removed ids (None when it failed or was unfinished).

    A run killed at its time limit is ``unfinished``: its wall is the limit and its monitor's peaks are those
    until then, lower bounds both.
    """

    def __init__(self, name: str):
        self.name = name
        self.wall = 0.0
        self.monitor: TreeMonitor | None = None
        self.removed: set[str] | None = None
        self.unfinished = False
        self.error = ""

    def row(self) -> list:
        if self.unfinished:
            monitor = self.monitor
            peaks = [f">= {monitor.peak_pss / GIB:.2f}", f">= {monitor.peak_process_pss / GIB:.2f}"]
            return [self.name, f"> {self.wall:.0f} (killed)", *peaks, "unfinished"]
        if self.removed is None:
            return [self.name, "failed", "", "", ""]
        monitor = self.monitor
        return [
            self.name,
            f"{self.wall:.1f}",
            f"{monitor.peak_pss / GIB:.2f}",
            f"{monitor.peak_process_pss / GIB:.2f}",
            len(self.removed),
        ]


def _measure(name: str, command: list[str], log: pathlib.Path, removed, limit: float | None = None) -> _Run:
    """Runs ``command`` measured, then ``removed()`` for its removed ids; a failure is kept in the run, printed.

    A run past ``limit`` seconds is killed and kept as unfinished.
    """
    run = _Run(name)
    print(f"{name}: {shlex.join(command)}", flush=True)
    try:
        run.wall, run.monitor = run_measured(command, log, limit=limit)
        run.removed = removed()
    except Unfinished as unfinished:
        run.wall, run.monitor, run.unfinished = unfinished.limit, unfinished.monitor, True
        run.error = f"{name}: {unfinished}"
        print(run.error, file=sys.stderr, flush=True)
    except (RuntimeError, OSError, ValueError, KeyError) as error:
        run.error = f"{name} failed: {error}"
        print(run.error, file=sys.stderr, flush=True)
    return run


def _ours(name: str, source: pathlib.Path, output: pathlib.Path, step: str, args) -> _Run:
    shutil.rmtree(output, ignore_errors=True)
    command = ["beamtrove", "run", "dedup", "--input", str(source / "*.jsonl.gz"), "--output", str(output)]
    command += ["--dedup", step, "--staged", "--workers", str(args.workers), "--memory", str(args.memory)]
    command += ["--progress_interval", "0"]
    log = output.parent / f"{output.name}.log"
    return _measure(name, command, log, lambda: excluded_ids(output / "excluded" / step))


def _same_text_kept(differ: set[str], kept: set[str], peer_kept: set[str], digests: dict[str, bytes]) -> int:
    """How many of the ``differ`` documents have a text both runs keep as many copies of: only the copy differs."""
    ours = collections.Counter(digests[key] for key in kept)
    theirs = collections.Counter(digests[key] for key in peer_kept)
    return sum(1 for key in differ if ours[digests[key]] == theirs[digests[key]])


def _compare(results: Results, title: str, ours: _Run, peers: list[_Run], digests: dict[str, bytes]) -> None:
    """Prints and records the pair's table: each peer's ratios to ours and how far the removed sets differ."""
    columns = ["run", "wall s", "peak tree PSS GiB", "largest process GiB", "removed"]
    columns += ["peer wall / ours", "peer tree PSS / ours", "removed differ", "of peer's removed"]
    columns += ["differ, same text kept", "kept Jaccard"]
    rows = [[*ours.row(), "", "", "", "", "", ""]]
    every = set(digests)
    for peer in peers:
        row = peer.row()
        if peer.unfinished and ours.removed is not None:
            bounds = [f">= {peer.wall / ours.wall:.2f}x", f">= {peer.monitor.peak_pss / ours.monitor.peak_pss:.2f}x"]
            row += [*bounds, "", "", "", ""]
        elif peer.removed is not None and ours.removed is not None:
            differ = ours.removed ^ peer.removed
            kept, peer_kept = every - ours.removed, every - peer.removed
            row += [
                f"{peer.wall / ours.wall:.2f}x",
                f"{peer.monitor.peak_pss / ours.monitor.peak_pss:.2f}x",
                len(differ),
                f"{len(differ) / max(len(peer.removed), 1):.2%}",
                _same_text_kept(differ, kept, peer_kept, digests),
                f"{jaccard(kept, peer_kept):.4f}",
            ]
        else:
            row += ["", "", "", "", "", ""]
        rows.append(row)
    print(results.table(title, columns, rows), flush=True)


def _speed_goal(results: Results, label: str, ours: _Run, peer: _Run, speed: float, memory: float) -> None:
    """Checks ours at least ``speed`` times the peer's speed and at most ``memory`` times its tree peak PSS.

    Against an unfinished peer both ratios are bounds (its wall and peak were at least those measured), which
    prove a goal met or leave it unproven, a miss.
    """
    if ours.removed is None or (peer.removed is None and not peer.unfinished):
        return
    ratio = peer.wall / ours.wall
    results.check(f"{label}: staged at least {speed:g}x {peer.name}'s speed", ratio >= speed)
    pss = ours.monitor.peak_pss / peer.monitor.peak_pss
    results.check(f"{label}: staged tree peak PSS at most {memory:g}x {peer.name}'s", pss <= memory)
    bound = "at least " if peer.unfinished else ""
    line = f"{label}: staged is {bound}{ratio:.2f}x {peer.name}'s speed (goal {speed:g}x), "
    bound = "at most " if peer.unfinished else ""
    print(results.note(line + f"{bound}{pss:.2f}x its tree peak PSS (goal <= {memory:g}x)"), flush=True)


def _minhash(results: Results, label: str, source: pathlib.Path, digests: dict[str, bytes], args) -> list[_Run]:
    workdir, processes = args.workdir, args.workers
    ours = _ours("beamtrove minhash staged", source, workdir / f"{label}-minhash-staged", "minhash", args)

    peers = []
    if not (label == "single" and args.datatrove_split_only):
        theirs = workdir / f"{label}-datatrove-minhash"
        shutil.rmtree(theirs, ignore_errors=True)
        command = datatrove_minhash_command(datatrove_python(args.datatrove_venv), source, theirs, 4)
        log = workdir / f"{theirs.name}.log"
        removed = functools.partial(datatrove_removed_ids, theirs)
        peers.append(_measure("DataTrove 4-stage MinHash", command, log, removed, args.peer_limit))

    python = pinned_python(TEXT_DEDUP, args.text_dedup_venv, base_python=args.python312)
    output, cache = workdir / f"{label}-text-dedup-minhash", workdir / f"{label}-text-dedup-cache"
    for folder in (output, cache):
        shutil.rmtree(folder, ignore_errors=True)
    log = workdir / f"{output.name}.log"
    text_dedup = _measure(
        "text-dedup MinHash",
        text_dedup_command(python, source, output, cache, processes),
        log,
        lambda: set(digests) - text_dedup_kept_ids(python, output),
        args.peer_limit,
    )
    if text_dedup.removed is not None:
        filtered = _TEXT_DEDUP_FILTERED.search(log.read_text(errors="replace"))
        short = filtered.group(1) if filtered else "an unknown number of"
        print(results.note(f"{label}: text-dedup dropped {short} documents of fewer than 5 words before dedup"))
    shutil.rmtree(cache, ignore_errors=True)

    peers.append(text_dedup)
    _compare(results, f"{label}: MinHash, {len(digests)} documents", ours, peers, digests)
    for peer, goals in zip(peers, [*_MINHASH_GOALS.values()][-len(peers) :], strict=True):
        _speed_goal(results, label, ours, peer, *goals)
    return [ours, *peers]


def _bloom(results: Results, label: str, source: pathlib.Path, digests: dict[str, bytes], args) -> list[_Run]:
    workdir = args.workdir
    ours = _ours("beamtrove bloom staged", source, workdir / f"{label}-bloom-staged", "bloom", args)

    documents = dolma_documents(source, workdir / f"{source.name}-dolma")
    dolma = pinned_python(DOLMA, args.dolma_venv, install_steps=[[DOLMA, _DOLMA_BOTO3]]).parent / "dolma"
    work = workdir / f"{label}-dolma-dedupe"
    peer = _measure(
        "dolma Bloom dedupe",
        dolma_command(dolma, documents, work, args.workers),
        workdir / f"{work.name}.log",
        lambda: dolma_removed_ids(documents),
        args.peer_limit,
    )

    _compare(results, f"{label}: Bloom, {len(digests)} documents", ours, [peer], digests)
    if ours.removed is not None and peer.removed is not None:
        ratio = ours.wall / peer.wall
        goal = _DOLMA_WALL_GOAL
        results.check(f"{label}: staged bloom wall at most {goal:g}x dolma's", ratio <= goal)
        print(results.note(f"{label}: staged bloom's wall is {ratio:.2f}x dolma's (goal <= {goal:g}x)"), flush=True)
    return [ours, peer]


def _python312() -> str:
    """A Python 3.12 to make text-dedup's venv with: pyenv's newest 3.12, else ``python3.12`` on the PATH."""
    found = sorted(pathlib.Path.home().glob(".pyenv/versions/3.12*/bin/python"))
    return str(found[-1]) if found else "python3.12"


def _arguments() -> argparse.Namespace:
    parser = argument_parser(__doc__)
    parser.add_argument("--records", type=int, default=102_000, help="make_warc.py records (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="workers of every tool (default: %(default)s)")
    parser.add_argument("--memory", type=int, default=1 << 30, help="--memory of the staged runs (default: 1 GiB)")
    parser.add_argument("--single_file", action="store_true", help="also run everything on one concatenated file")
    parser.add_argument("--only", choices=["minhash", "bloom"], help="run one pair only")
    parser.add_argument(
        "--peer_limit",
        type=float,
        default=1800.0,
        help="seconds a peer may run; one still running is killed and reported unfinished, its wall and memory "
        "as bounds (default: %(default)s)",
    )
    parser.add_argument(
        "--datatrove_split_only",
        action="store_true",
        help="with --single_file, run DataTrove on the split files only (its reader gives each file whole to one "
        "task, so on one file one task reads every document)",
    )
    add_datatrove_venv_argument(parser)
    parser.add_argument(
        "--text_dedup_venv", type=pathlib.Path, default=TEXT_DEDUP_VENV, help="made on first use (default: %(default)s)"
    )
    parser.add_argument(
        "--dolma_venv", type=pathlib.Path, default=DOLMA_VENV, help="made on first use (default: %(default)s)"
    )
    parser.add_argument(
        "--python312", default=_python312(), help="the Python 3.12 making text-dedup's venv (default: %(default)s)"
    )
    add_workdir_arguments(parser, "beamtrove-peer-dedup")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    results = Results(__file__, __doc__, args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    source = split_documents(args.workdir, records=args.records, files=16, extractor="resiliparse")
    inputs = [("split4", source)] + ([("single", single_file(source))] if args.single_file else [])
    runs = []
    for label, folder in inputs:
        digests = _digests(folder)
        print(f"{label}: {len(digests)} documents in {folder}", flush=True)
        if args.only in (None, "minhash"):
            runs += _minhash(results, label, folder, digests, args)
        if args.only in (None, "bloom"):
            runs += _bloom(results, label, folder, digests, args)
    for run in runs:
        if run.error:
            results.note(run.error.splitlines()[0])
    for check in results.checks:
        print(f"{verdict(check['passed'])}  {check['goal']}")
    results.write()
    if any(run.removed is None and not run.unfinished for run in runs):
        raise SystemExit(1)


if __name__ == "__main__":
    sys.exit(main())
