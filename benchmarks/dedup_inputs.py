"""Real extracted documents and DataTrove's MinHash run, for the dedup benchmarks.

The documents come from make_warc.py sets (real pages plus exact and near
copies) extracted by ``beamtrove run extract``; both tools then read the same
JSONL files, split round-robin so that DataTrove's tasks share the work.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import pathlib
import shutil

from benchmarks.common import jsonl_rows
from benchmarks.token_inputs import extract_warc_set

__all__ = ["datatrove_minhash_command", "datatrove_removed_ids", "excluded_ids", "split_documents"]

# Runs in DataTrove's venv: argv = JSONL folder, work folder, tasks. Prints each stage's seconds.
_DATATROVE_MINHASH = """
import sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

source, work, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = MinhashConfig()
read = lambda: JsonlReader(source, glob_pattern="*.jsonl.gz")
stages = [
    ([read(), MinhashDedupSignature(work + "/signatures", config=config)], tasks, 2),
    ([MinhashDedupBuckets(work + "/signatures", work + "/buckets", config=config)], config.num_buckets, 2),
    ([MinhashDedupCluster(work + "/buckets", work + "/remove_ids", config=config)], 1, 1),
    (
        [
            read(),
            MinhashDedupFilter(work + "/remove_ids", exclusion_writer=JsonlWriter(work + "/removed")),
            JsonlWriter(work + "/kept"),
        ],
        tasks,
        2,
    ),
]
for number, (pipeline, stage_tasks, workers) in enumerate(stages, 1):
    start = time.perf_counter()
    LocalPipelineExecutor(
        pipeline=pipeline, tasks=stage_tasks, workers=workers, logging_dir=f"{work}/logs/stage{number}"
    ).run()
    print(f"stage {number}: {time.perf_counter() - start:.2f} s", flush=True)
"""


def split_documents(
    workdir: pathlib.Path, *, records: int, files: int, seed: int = 1, extractor: str = "trafilatura", parts: int = 4
) -> pathlib.Path:
    """A folder of ``parts`` JSONL files holding the extracted documents of a make_warc set (id, text, url)."""
    extracted = extract_warc_set(workdir, records, files, seed, extractor)
    folder = workdir / f"{extracted.name}-split{parts}"
    if (folder / "done").exists():
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    number = 0
    with contextlib.ExitStack() as stack:
        outs = [
            stack.enter_context(gzip.open(folder / f"part-{n:03d}.jsonl.gz", "wt", encoding="utf-8"))
            for n in range(parts)
        ]
        for row in jsonl_rows(extracted / "documents", "*.jsonl.gz"):
            kept = {"id": row["id"], "text": row["text"], "metadata": {"url": row["metadata"].get("url")}}
            outs[number % parts].write(json.dumps(kept, ensure_ascii=False) + "\n")
            number += 1
    (folder / "done").write_text(str(number))
    return folder


def datatrove_minhash_command(python: pathlib.Path, source: pathlib.Path, work: pathlib.Path, tasks: int) -> list[str]:
    """DataTrove's four MinHash stages (default config) on LocalPipelineExecutor, 2 workers."""
    return [str(python), "-c", _DATATROVE_MINHASH, str(source), str(work), str(tasks)]


def excluded_ids(folder: pathlib.Path) -> set[str]:
    """The ids of the documents in a folder of JSONL(.gz) files and its subfolders."""
    return {row["id"] for row in jsonl_rows(folder, "**/*.jsonl*")}


def datatrove_removed_ids(work: pathlib.Path) -> set[str]:
    """The documents DataTrove's MinHash filter removed."""
    return excluded_ids(work / "removed")
