"""Real extracted documents for the tokenization benchmarks.

Builds a WARC set from the real pages with make_warc.py and extracts it with
``beamtrove run extract`` (trafilatura), once per work directory; then writes
the documents as JSONL in a fixed order without ids, so that beamtrove (which
keeps unshuffled documents in id order, here ``<file>/<line>``) and DataTrove
(which keeps input order) see the same sequence.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Iterator

from benchmarks.common import TOKENIZER, jsonl_rows, warc_set, write_jsonl

__all__ = ["datatrove_tokenize_command", "extract_warc_set", "prepare_documents"]

# Runs in DataTrove's venv: argv = JSONL folder, output folder, tokenizer, tasks, shuffle and save loss ("1"/"0").
_DATATROVE_TOKENIZE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer

source, output, tokenizer, tasks, shuffle, loss = sys.argv[1:7]
LocalPipelineExecutor(
    pipeline=[
        JsonlReader(source, glob_pattern="*.jsonl"),
        DocumentTokenizer(
            output_folder=output,
            tokenizer_name_or_path=tokenizer,
            eos_token="<|endoftext|>",
            shuffle_documents=shuffle == "1",
            seed=1,
            save_loss_metadata=loss == "1",
        ),
    ],
    tasks=int(tasks),
    workers=min(int(tasks), 2),
    logging_dir=output + "-logs",
).run()
"""


def datatrove_tokenize_command(
    python: pathlib.Path,
    source: pathlib.Path,
    output: pathlib.Path,
    *,
    tasks: int = 1,
    shuffle: bool = False,
    loss: bool = False,
) -> list[str]:
    """The command running DataTrove's JsonlReader → DocumentTokenizer (GPT-2, EOS) on LocalPipelineExecutor."""
    flags = ["1" if shuffle else "0", "1" if loss else "0"]
    return [str(python), "-c", _DATATROVE_TOKENIZE, str(source), str(output), str(TOKENIZER), str(tasks), *flags]


def extract_warc_set(
    workdir: pathlib.Path, records: int, files: int, seed: int, extractor: str = "trafilatura"
) -> pathlib.Path:
    """``beamtrove run extract``'s output folder for a make_warc set, extracted once per work directory."""
    warc_dir = warc_set(workdir, records, files, seed)
    # Trafilatura's folder keeps its original name, so that earlier work directories are reused.
    flavour = "" if extractor == "trafilatura" else f"{extractor}-"
    extracted = workdir / f"extracted-{flavour}r{records}-f{files}-s{seed}"
    if not (extracted / "stats.json").exists():
        print(f"extracting {warc_dir} (once)", file=sys.stderr)
        subprocess.run(
            [
                "beamtrove",
                "run",
                "extract",
                "--input",
                str(warc_dir / "*.warc.gz"),
                "--output",
                str(extracted),
                "--progress_interval",
                "0",
                "--extractor",
                extractor,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return extracted


def _no_loss_ranges(number: int, text: str) -> list[list[int]] | None:
    # A mix that exercises both ways a range is applied: masked in the middle
    # of a document (a "prompt" at the start) and cut off at its end.
    if number % 3 == 1:
        return [[0, len(text) // 5]]
    if number % 7 == 2:
        return [[len(text) // 2, len(text)]]
    return None


def prepare_documents(
    workdir: pathlib.Path, *, records: int = 3000, files: int = 4, seed: int = 1, repeat: int = 1
) -> pathlib.Path:
    """``<workdir>/.../documents.jsonl``: the extracted texts ``repeat`` times over, some with ``no_loss_ranges``."""
    extracted = extract_warc_set(workdir, records, files, seed)
    ordered = workdir / f"ordered-r{records}-f{files}-s{seed}-x{repeat}" / "documents.jsonl"
    if ordered.exists():
        return ordered
    texts = [row["text"] for row in jsonl_rows(extracted / "documents", "*.jsonl.gz")]
    write_jsonl(ordered.with_suffix(".partial"), _ordered_rows(texts, repeat)).rename(ordered)
    return ordered


def _ordered_rows(texts: list[str], repeat: int) -> Iterator[dict]:
    for number in range(len(texts) * repeat):
        text = texts[number % len(texts)]
        ranges = _no_loss_ranges(number, text)
        yield {"text": text, "metadata": {"no_loss_ranges": ranges}} if ranges else {"text": text}
