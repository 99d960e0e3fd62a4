"""stats.json: metrics merged per step, in pipeline order, and the table."""

from __future__ import annotations

import json

import pytest

from beamtrove.execution.run import run_pipeline
from beamtrove.option_parsing import parse
from beamtrove.options import ConfigurationError
from beamtrove.pipelines import pipeline_spec
from beamtrove.stats import format_stats, merge_stats, order_steps, read_stats, write_stats
from beamtrove.transforms.readers import ReadWarc
from beamtrove.transforms.writers import WriteJsonl
from tests.conftest import require, run_and_collect


def test_steps_in_pipeline_order_with_merged_counters_and_distributions(data_dir, tmp_path):
    path = require(data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz")

    def build(pipeline):
        pipeline | "Zeta" >> ReadWarc(str(path)) | "Alpha" >> WriteJsonl(str(tmp_path / "out"))

    stats = run_and_collect(build)
    assert list(stats) == ["Zeta", "Alpha"]
    assert stats["Zeta"]["counters"]["in"] == 50
    assert stats["Alpha"]["counters"]["files"] == 1  # counted by the finalize step, merged into Alpha
    lengths = stats["Zeta"]["distributions"]["doc_chars"]
    assert lengths["count"] == 16
    assert lengths["min"] <= lengths["mean"] <= lengths["max"]

    written = write_stats({"steps": stats}, str(tmp_path))
    assert read_stats(str(tmp_path)) == read_stats(written) == {"steps": stats}


def test_table_flags_records_a_step_lost():
    table = format_stats(
        {
            "steps": {
                "Read": {"counters": {"in": 10, "out": 7, "skipped.request_record": 2}, "distributions": {}},
                "Write": {"counters": {"in": 7, "out": 7, "files": 1}, "distributions": {}},
            }
        }
    )
    lines = table.splitlines()
    assert lines[0].split() == ["step", "in", "out", "kept%", "total%", "skipped", "dropped", "errors", "seconds"]
    assert lines[1].split() == ["Read", "10", "7", "70.0%", "100.0%", "2", "0", "0"]
    assert "    unaccounted: 1" in lines
    assert "    skipped.request_record: 2" in lines
    assert lines[4].split() == ["Write", "7", "7", "100.0%", "100.0%", "0", "0", "0"]


def test_every_step_has_its_row_with_shares_of_its_input_and_of_what_was_read():
    stats = {
        "funnel": ["ReadWarc", "url_filter", "extract", "language_filter", "WriteDocuments"],
        "steps": {
            "ReadWarc": {"counters": {"in": 166, "out": 83, "skipped.request_record": 83}, "seconds": 0.8},
            "url_filter": {"counters": {"in": 83, "out": 83}, "seconds": 0.04},
            "extract": {"counters": {"in": 83, "out": 80, "dropped.empty": 3}, "seconds": 59.61},
            # Nothing survived language identification: the writer counted nothing and still has its row.
            "language_filter": {"counters": {"in": 80, "out": 0, "dropped.language": 80}},
            "WriteDocuments": {"counters": {}},
            "write_excluded_language_filter": {"counters": {"in": 80, "out": 80, "files": 1}},
        },
    }
    rows = {line.split()[0]: line.split()[1:] for line in format_stats(stats).splitlines()[1:] if line[:1].strip()}
    assert rows["ReadWarc"] == ["166", "83", "50.0%", "100.0%", "83", "0", "0", "0.8"]
    assert rows["extract"] == ["83", "80", "96.4%", "96.4%", "0", "3", "0", "59.6"]
    assert rows["language_filter"] == ["80", "0", "0.0%", "0.0%", "0", "80", "0"]
    assert rows["WriteDocuments"] == ["0", "0", "-", "0.0%", "0", "0", "0"]
    # A writer of what a step set aside is not part of the funnel: no shares.
    assert rows["write_excluded_language_filter"] == ["80", "80", "0", "0", "0"]


def test_a_step_over_the_whole_input_shows_its_details_without_an_empty_funnel_row():
    stats = {
        "steps": {
            "Read": {"counters": {"in": 27, "out": 27}},
            "minhash": {"counters": {"documents": 27, "links": 28}},
            "minhash_remove": {"counters": {"in": 27, "out": 25, "dropped.minhash_duplicate": 2}},
        }
    }
    lines = format_stats(stats).splitlines()
    assert lines[2] == "minhash"
    assert lines[3:5] == ["    documents: 27", "    links: 28"]


def test_an_empty_run_still_prints_its_steps():
    table = format_stats({"funnel": ["Read", "WriteDocuments"], "steps": {"Read": {}, "WriteDocuments": {}}})
    assert [line.split()[:3] for line in table.splitlines()[1:3]] == [["Read", "0", "0"], ["WriteDocuments", "0", "0"]]
    assert "(no step counted anything)" in format_stats({"steps": {}})


def test_steps_take_their_place_in_the_funnel_and_writers_come_last():
    steps = {
        name: {} for name in ("ReadAgain", "write_excluded_minhash", "minhash_components", "Read", "WriteDocuments")
    }
    steps |= {"minhash": {}, "WriteDeadLetters": {}, "ProcessInputs": {}, "minhash_remove": {}}
    rank = {"Read": 0, "minhash": 1, "minhash_components": 2, "ReadAgain": 3, "minhash_remove": 4, "WriteDocuments": 9}
    funnel = ["Read", "minhash", "WriteDocuments"]
    writers = ["write_excluded_minhash", "WriteDeadLetters"]
    assert list(order_steps(steps, funnel, writers, rank)) == [
        "Read",
        "minhash",
        "minhash_components",
        "ReadAgain",
        "minhash_remove",
        "WriteDocuments",
        "ProcessInputs",
        "write_excluded_minhash",
        "WriteDeadLetters",
    ]


def test_tokens_before_and_after_dedup_give_the_dedup_ratio():
    stats = {
        "steps": {
            "tokens_before_dedup": {"counters": {"in": 10, "out": 10, "tokens": 4_000}},
            "tokens_after_dedup": {"counters": {"in": 7, "out": 7, "tokens": 3_000}},
        }
    }
    assert "Tokens: 4,000 before dedup, 3,000 after: dedup kept 75.0% of them." in format_stats(stats)


def test_a_dedup_run_lists_its_steps_in_the_order_they_run(review_jsonl, tmp_path):
    dedup = pipeline_spec("dedup")
    argv = ["--input", str(review_jsonl), "--output", str(tmp_path / "out"), "--dedup", "exact,minhash"]
    result = run_pipeline(dedup, parse(dedup, [*argv, "--progress_interval", "0"]))
    steps = list(result.stats["steps"])
    assert steps[0] == "read" and steps.index("exact") < steps.index("minhash") < steps.index("write_documents")
    assert steps[-3:] == ["write_excluded_exact", "write_excluded_minhash", "write_dead_letters"]
    assert result.stats["funnel"] == ["read", "exact", "minhash", "write_documents"]
    assert all(result.stats["steps"][step].get("seconds") is not None for step in result.stats["funnel"])


def test_shards_stats_add_up_counters_distributions_and_seconds():
    shard = {
        "Read": {"counters": {"in": 10, "out": 8}, "distributions": {}, "seconds": 1.25},
        "filter": {
            "counters": {"in": 8, "out": 5},
            "distributions": {"n": {"count": 8, "sum": 40, "min": 1, "max": 9}},
        },
    }
    other = {"Read": {"counters": {"in": 5, "out": 5}, "seconds": 0.5}, "Write": {"counters": {"in": 3, "out": 3}}}
    merged = merge_stats([shard, other])
    assert list(merged) == ["Read", "filter", "Write"]
    assert merged["Read"] == {"counters": {"in": 15, "out": 13}, "distributions": {}, "seconds": 1.75}
    assert merged["filter"]["distributions"]["n"] == {"count": 8, "sum": 40, "min": 1, "max": 9, "mean": 5.0}


def test_each_dedup_step_states_the_share_of_documents_and_characters_it_kept():
    stats = {
        "steps": {
            "exact_dedup": {"counters": {"in": 8, "out": 6, "chars_in": 10_000, "chars_out": 9_000}},
            "sentence_dedup": {"counters": {"in": 6, "out": 6, "chars_in": 9_000, "chars_out": 6_750}},
            "fineweb_quality": {"counters": {"in": 6, "out": 5}},
        }
    }
    notes = format_stats(stats).splitlines()
    assert "exact_dedup kept 75.0% of its documents and 90.0% of their characters." in notes
    assert "sentence_dedup kept 100.0% of its documents and 75.0% of their characters." in notes
    assert not any(note.startswith("fineweb_quality kept") for note in notes)


def test_a_runs_stats_json_cut_anywhere_is_refused_as_cut_short_and_naming_it(review_jsonl, tmp_path):
    convert = pipeline_spec("convert")
    argv = ["--input", str(review_jsonl), "--output", str(tmp_path / "out"), "--progress_interval", "0"]
    result = run_pipeline(convert, parse(convert, argv))
    path = tmp_path / "out" / "stats.json"
    data = path.read_bytes()
    assert read_stats(str(path)) == json.loads(data) == result.stats
    damaged = tmp_path / "damaged" / "stats.json"
    damaged.parent.mkdir()
    for end in range(1, len(data.rstrip())):
        damaged.write_bytes(data[:end])
        with pytest.raises(ConfigurationError) as refused:
            read_stats(str(damaged.parent))
        assert str(refused.value) == (
            f"{damaged} is damaged (cut short: its {end:,} bytes end inside the JSON): restore it, or rerun the "
            "pipeline to write it again"
        ), end
