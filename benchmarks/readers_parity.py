"""Do beamtrove's Arrow IPC and Hugging Face readers give the documents DataTrove 0.10.1's give?

Takes extracted documents (the JSONL output of ``beamtrove run extract``) and
stores them, in a scratch folder, in every layout the two readers take:

- ``ipc-file`` / ``ipc-stream``: Arrow IPC files (file format, stream
  format) in DataTrove's document layout (``text``, ``id``, ``metadata``),
  three files, batches of 100 rows;
- ``ipc-flat``: IPC files with one column per metadata field and no id or
  ``file_path`` column, so ids and ``file_path`` come from the readers;
- ``hf-saved``: ``Dataset.save_to_disk`` in several shards, flat columns, no id;
- ``hf-dict``: ``DatasetDict.save_to_disk`` with ``train`` and ``test`` splits;
- ``hf-cache``: the dataset as ``load_dataset`` leaves it in its cache for a
  hub dataset (``beamtrove/extract-sample``, split ``test``), read by name offline.

Then reads each with beamtrove's reader and with DataTrove's (``IpcReader``,
with ``stream=True`` for the stream format, which its default cannot read;
``HuggingFaceDatasetReader`` with ``load_from_disk=True`` for folders, or the
hub name and ``split`` for the cache, under ``HF_DATASETS_OFFLINE=1`` and
``HF_HUB_OFFLINE=1``), each with its defaults otherwise, and prints per layout
the document counts and how many documents are identical (same id, text and
metadata), and how many are identical once null metadata values count as
absent keys (an Arrow struct gives every row every key of the column).
DataTrove's readers need ``datasets`` in its venv (a new venv gets it; in
an older one: ``<venv>/bin/pip install datasets``); building the layouts
needs it here.

Usage:
    python -m benchmarks.readers_parity DOCUMENTS_DIR [--limit N] [--datatrove-venv PATH] [--show 3]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from datasets.data_files import DataFilesDict
from datasets.packaged_modules.parquet.parquet import Parquet

from beamtrove.transforms.readers import ReadHuggingFace, ReadIpc
from benchmarks.datatrove_env import DEFAULT_VENV, datatrove_python

_HUB_NAME = "beamtrove/extract-sample"
_BATCH_ROWS = 100

_DATATROVE_SCRIPT = """
import hashlib, json, sys
from datatrove.pipeline.readers import HuggingFaceDatasetReader, IpcReader
cases = json.loads(sys.argv[1])
readers = {
    "ipc-file": IpcReader(cases["ipc-file"]),
    "ipc-stream": IpcReader(cases["ipc-stream"], stream=True),
    "ipc-flat": IpcReader(cases["ipc-flat"]),
    "hf-saved": HuggingFaceDatasetReader(cases["hf-saved"], load_from_disk=True),
    "hf-dict": HuggingFaceDatasetReader(cases["hf-dict"] + "/train", load_from_disk=True),
    "hf-cache": HuggingFaceDatasetReader(cases["hf-cache"], dataset_options={"split": "test"}),
}
out = {}
for name, reader in readers.items():
    out[name] = [
        [d.id, hashlib.sha256(d.text.encode("utf-8", "surrogatepass")).hexdigest(), d.metadata]
        for d in reader.run(None, rank=0, world_size=1)
    ]
json.dump(out, sys.stdout, default=str)
"""


def _documents(folder: pathlib.Path, limit: int) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("*.jsonl*")):
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as lines:
            rows.extend(json.loads(line) for line in lines if line.strip())
    return rows[:limit]


def _flat(row: dict) -> dict:
    """A row with its metadata as columns, without id or file_path."""
    metadata = {k: v for k, v in row["metadata"].items() if k != "file_path"}
    return {"text": row["text"], **metadata}


def _write_ipc(folder: pathlib.Path, rows: list[dict], stream: bool) -> None:
    folder.mkdir(parents=True)
    third = -(-len(rows) // 3)
    for number in range(3):
        table = pa.Table.from_pylist(rows[number * third : (number + 1) * third])
        path = folder / f"part-{number}.{'arrows' if stream else 'arrow'}"
        with (pa.ipc.new_stream if stream else pa.ipc.new_file)(path, table.schema) as writer:
            writer.write_table(table, max_chunksize=_BATCH_ROWS)


def prepare_as_hub_dataset(splits: dict[str, list[dict]], name: str, cache: pathlib.Path) -> pathlib.Path:
    """Leaves ``splits`` in the datasets cache ``cache`` as ``load_dataset(name)`` leaves a hub dataset.

    That is ``<owner>___<name>/default/0.0.0/<hash>/``; a local Parquet
    builder writes the same files, which are then moved there. Returns that folder.
    """
    owner, dataset_name = name.split("/")
    with tempfile.TemporaryDirectory(prefix="beamtrove-parquet-") as scratch:
        files = {}
        for split, rows in splits.items():
            files[split] = [str(pathlib.Path(scratch, f"{split}.parquet"))]
            pq.write_table(pa.Table.from_pylist(rows), files[split][0])
        builder = Parquet(
            cache_dir=str(cache),
            dataset_name=dataset_name,
            hash="0123456789abcdef",
            data_files=DataFilesDict.from_local_or_remote(files, base_path=scratch),
        )
        builder.download_and_prepare()
    # <cache>/<name as datasets spells it>/<config id>/0.0.0/<hash>
    prepared = pathlib.Path(builder.cache_dir)
    target = cache / f"{owner}___{prepared.parts[-4]}" / "default" / "0.0.0" / prepared.name
    target.parent.mkdir(parents=True)
    prepared.rename(target)
    return target


def _build(scratch: pathlib.Path, rows: list[dict]) -> dict[str, str]:
    """Stores ``rows`` in every layout; returns where each is."""
    cases = {name: str(scratch / name) for name in ("ipc-file", "ipc-stream", "ipc-flat", "hf-saved", "hf-dict")}
    _write_ipc(scratch / "ipc-file", rows, stream=False)
    _write_ipc(scratch / "ipc-stream", rows, stream=True)
    flat_rows = [_flat(row) for row in rows]
    _write_ipc(scratch / "ipc-flat", flat_rows, stream=False)
    flat = datasets.Dataset.from_list(flat_rows)
    flat.save_to_disk(cases["hf-saved"], num_shards=4)
    half = len(rows) // 2
    datasets.DatasetDict({"train": flat.select(range(half)), "test": flat.select(range(half, len(rows)))}).save_to_disk(
        cases["hf-dict"]
    )
    cache = scratch / "hf-cache"
    prepare_as_hub_dataset({"train": flat_rows[:half], "test": flat_rows[half:]}, _HUB_NAME, cache)
    cases["hf-cache"] = _HUB_NAME
    cases["cache_dir"] = str(cache)
    return cases


def _digest(doc) -> list:
    return [doc.id, hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest(), doc.metadata]


def _ours(cases: dict[str, str]) -> dict[str, list]:
    readers = {
        "ipc-file": ReadIpc(cases["ipc-file"]),
        "ipc-stream": ReadIpc(cases["ipc-stream"]),
        "ipc-flat": ReadIpc(cases["ipc-flat"]),
        "hf-saved": ReadHuggingFace(cases["hf-saved"]),
        "hf-dict": ReadHuggingFace(cases["hf-dict"], split="train"),
        "hf-cache": ReadHuggingFace(cases["hf-cache"], split="test", cache_dir=cases["cache_dir"]),
    }
    return {
        name: [_digest(doc) for file in reader.files for doc in reader.read_file(file)]
        for name, reader in readers.items()
    }


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _same_but_nulls(ours: list | None, theirs: list) -> bool:
    return ours is not None and ours[:2] == theirs[:2] and _without_nulls(ours[2]) == _without_nulls(theirs[2])


def _compare(name: str, ours: list, theirs: list, show: int) -> None:
    ours_by_id = {doc[0]: doc for doc in ours}
    identical = sum(ours_by_id.get(doc[0]) == doc for doc in theirs)
    null_blind = sum(_same_but_nulls(ours_by_id.get(doc[0]), doc) for doc in theirs)
    print(
        f"{name:11} beamtrove {len(ours):5}  DataTrove {len(theirs):5}  identical {identical:5}  "
        f"different {len(theirs) - identical:5}  identical with nulls as absent {null_blind:5}  "
        f"same order {[d[0] for d in ours] == [d[0] for d in theirs]}"
    )
    differing = [doc for doc in theirs if ours_by_id.get(doc[0]) != doc]
    for doc in differing[:show]:
        mine = ours_by_id.get(doc[0])
        if mine is None:
            print(f"    {doc[0]}: only DataTrove reads it")
            continue
        fields = [field for field, a, b in zip(("id", "text"), mine[:2], doc[:2], strict=True) if a != b]
        keys = sorted(k for k in mine[2].keys() | doc[2].keys() if mine[2].get(k, "absent") != doc[2].get(k, "absent"))
        values = {k: (mine[2].get(k, "absent"), doc[2].get(k, "absent")) for k in keys}
        print(f"    {doc[0]}: {fields or ''} metadata (beamtrove, DataTrove): {values}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("documents", type=pathlib.Path, help="folder of JSONL(.gz) documents")
    parser.add_argument("--limit", type=int, default=3000, help="documents to use")
    parser.add_argument("--datatrove-venv", type=pathlib.Path, default=DEFAULT_VENV)
    parser.add_argument("--show", type=int, default=2, help="differing documents to print per layout")
    args = parser.parse_args()
    rows = _documents(args.documents, args.limit)
    if not rows:
        sys.exit(f"no JSONL documents in {args.documents}")
    python = datatrove_python(args.datatrove_venv)
    with tempfile.TemporaryDirectory(prefix="beamtrove-readers-") as scratch:
        cases = _build(pathlib.Path(scratch), rows)
        started = time.perf_counter()
        ours = _ours(cases)
        ours_seconds = time.perf_counter() - started
        offline = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
        offline["HF_DATASETS_CACHE"] = cases["cache_dir"]
        started = time.perf_counter()
        result = subprocess.run(
            [str(python), "-c", _DATATROVE_SCRIPT, json.dumps(cases)],
            check=True,
            capture_output=True,
            text=True,
            env=offline,
            cwd=scratch,
        )
        theirs_seconds = time.perf_counter() - started
    theirs = json.loads(result.stdout)
    print(f"{len(rows)} documents from {args.documents}")
    for name in theirs:
        _compare(name, json.loads(json.dumps(ours[name], default=str)), theirs[name], args.show)
    print(f"read all layouts: beamtrove {ours_seconds:.1f} s, DataTrove {theirs_seconds:.1f} s (with its start-up)")


if __name__ == "__main__":
    main()
