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
    python -m benchmarks.readers_parity DOCUMENTS_DIR [--limit N] [--datatrove_venv PATH] [--show 3] [--workdir DIR]
        [--results FILE]
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import sys
import tempfile
import time

import datasets
import pyarrow as pa

from beamtrove.transforms.readers import ReadHuggingFace, ReadIpc
from benchmarks.common import (
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    document_digest,
    json_output,
    jsonl_rows,
    prepare_as_hub_dataset,
)

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
        name: [
            document_digest(doc.id, doc.text, doc.metadata) for file in reader.files for doc in reader.read_file(file)
        ]
        for name, reader in readers.items()
    }


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _same_but_nulls(ours: list | None, theirs: list) -> bool:
    return ours is not None and ours[:2] == theirs[:2] and _without_nulls(ours[2]) == _without_nulls(theirs[2])


def _compare(name: str, ours: list, theirs: list, show: int) -> list:
    """Prints how one layout's documents compare; returns the table row."""
    ours_by_id = {doc[0]: doc for doc in ours}
    identical = sum(ours_by_id.get(doc[0]) == doc for doc in theirs)
    null_blind = sum(_same_but_nulls(ours_by_id.get(doc[0]), doc) for doc in theirs)
    same_order = [d[0] for d in ours] == [d[0] for d in theirs]
    print(
        f"{name:11} beamtrove {len(ours):5}  DataTrove {len(theirs):5}  identical {identical:5}  "
        f"different {len(theirs) - identical:5}  identical with nulls as absent {null_blind:5}  "
        f"same order {same_order}"
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
    return [name, len(ours), len(theirs), identical, len(theirs) - identical, null_blind, same_order]


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("documents", type=pathlib.Path, help="folder of JSONL(.gz) documents")
    parser.add_argument("--limit", type=int, default=3000, help="documents to use")
    add_datatrove_venv_argument(parser)
    parser.add_argument("--show", type=int, default=2, help="differing documents to print per layout")
    add_workdir_arguments(parser, "beamtrove-readers-parity")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    rows = list(itertools.islice(jsonl_rows(args.documents), args.limit))
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
        theirs = json_output([python, "-c", _DATATROVE_SCRIPT, json.dumps(cases)], env=offline, cwd=scratch)
        theirs_seconds = time.perf_counter() - started
    print(f"{len(rows)} documents from {args.documents}")
    table = [
        _compare(name, json.loads(json.dumps(ours[name], default=str)), theirs[name], args.show) for name in theirs
    ]
    columns = ["layout", "beamtrove", "DataTrove", "identical", "different", "identical with nulls as absent"]
    results.table("The same documents through each reader", [*columns, "same order"], table)
    print(
        results.note(
            f"read all layouts: beamtrove {ours_seconds:.1f} s, DataTrove {theirs_seconds:.1f} s (with its start-up)"
        )
    )
    results.write()


if __name__ == "__main__":
    main()
