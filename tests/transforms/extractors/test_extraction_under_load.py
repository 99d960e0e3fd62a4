"""Machine load does not change what extraction keeps (issue 16, case 11).

With a wall-clock limit, 12 CPU-bound processes beside an extraction of 1200 make_warc.py records turned
dozens of pages into timeouts; the limit on CPU time gives the same documents and counters either way. The test
extracts 300 records beside 6 busy processes (the loaded run slows every test beside it): one of their pages
takes 0.53 s of CPU alone, more than the 1 s limit in wall-clock time as soon as the load halves the
extraction's share of a CPU; beside 6 busy processes it gets a quarter at most.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.conftest import beamtrove, busy_processes, jsonl_rows, make_warc_set

BUSY_PROCESSES = 6
# Two workers, two extraction processes: beside the busy ones they get twice the CPU share one would,
# which keeps the loaded run short on 2 cores. Both runs use the same workers.
RUNNER = ("--direct_running_mode", "multi_processing", "--direct_num_workers", "2")


def _extract(warcs: pathlib.Path, output: pathlib.Path) -> tuple[list[tuple[str, str]], dict[str, dict]]:
    """Runs ``beamtrove run extract`` with its default time limit; returns (sorted (id, text)s, counters by step)."""
    argv = ["run", "extract", "--input", str(warcs / "*.warc.gz"), "--output", str(output), *RUNNER]
    # Beside busy processes on 2 cores the run gets a fraction of a core.
    result = beamtrove(*argv, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    documents = sorted((row["id"], row["text"]) for row in jsonl_rows(output / "documents"))
    steps = json.loads((output / "stats.json").read_text())["steps"]
    return documents, {step: stats["counters"] for step, stats in steps.items()}


def _dead_letters(output: pathlib.Path) -> list[tuple[str | None, str, str]]:
    """(record id, reason, message) of each dead letter of the run into ``output``."""
    folder = output / "dead_letters"
    rows = jsonl_rows(folder) if folder.is_dir() else []
    return [(row.get("record_id"), row["reason"], row["message"]) for row in rows]


@pytest.mark.slow
def test_busy_processes_beside_the_extraction_change_no_document_and_no_counter(tmp_path):
    warcs = tmp_path / "warcs"
    warcs.mkdir()
    make_warc_set(warcs, "--records", "300", "--files", "2", "--seed", "0")

    alone_documents, alone_counters = _extract(warcs, tmp_path / "alone")
    with busy_processes(BUSY_PROCESSES):
        loaded_documents, loaded_counters = _extract(warcs, tmp_path / "loaded")

    assert loaded_counters == alone_counters, (
        f"extract alone: {alone_counters['extract']}; beside {BUSY_PROCESSES} busy processes: "
        f"{loaded_counters['extract']}; dead letters alone: {_dead_letters(tmp_path / 'alone')}, "
        f"beside them: {_dead_letters(tmp_path / 'loaded')}"
    )
    assert loaded_documents == alone_documents
    assert len(alone_documents) > 275, "most of the 300 real pages have a main text"
