"""Scanning an elastic job's input and cutting it into shards."""

from __future__ import annotations

import itertools
import random

import pytest

from beamtrove.execution.jobs.scan import cut_shards, scan_inputs, shard_inputs, shards


@pytest.mark.parametrize("num_shards", [1, 2, 7, 64])
def test_cuts_are_contiguous_non_empty_and_balanced(num_shards):
    rng = random.Random(num_shards)
    sizes = [rng.randint(1, 5000) for _ in range(3000)]
    bounds = cut_shards(sizes, num_shards)
    assert bounds[0] == 0 and bounds[-1] == len(sizes) and len(bounds) == num_shards + 1
    assert all(a < b for a, b in itertools.pairwise(bounds))
    ideal = sum(sizes) / num_shards
    for k in range(num_shards):
        # Each cut sits at the boundary nearest its ideal place, so a shard is off by at most one unit.
        assert abs(sum(sizes[bounds[k] : bounds[k + 1]]) - ideal) <= max(sizes)
    assert cut_shards(sizes, num_shards) == bounds


def test_cuts_leave_a_unit_for_every_shard_even_when_one_unit_is_huge():
    assert cut_shards([10**9, 1, 1, 1], 4) == [0, 1, 2, 3, 4]
    assert cut_shards([1, 1, 1, 10**9], 2) == [0, 3, 4]
    with pytest.raises(ValueError, match="5 non-empty"):
        cut_shards([1, 2, 3], 5)


def test_plain_jsonl_is_one_unit_per_record_and_shards_read_back_as_byte_ranges(review_jsonl):
    input_format, inputs, units = scan_inputs([str(review_jsonl)])
    assert input_format == "jsonl"
    assert [(entry["name"], entry["records"], entry["splittable"]) for entry in inputs] == [
        ("reviews-0.jsonl", 200, True),
        ("reviews-1.jsonl", 201, True),
        ("reviews-2.jsonl", 200, True),
    ]
    assert len(units["file"]) == 601 and units["records"].sum() == 601
    cut = shards(inputs, units, 4)
    assert [shard["id"] for shard in cut] == ["shard-00000", "shard-00001", "shard-00002", "shard-00003"]
    assert sum(shard["records"] for shard in cut) == 601
    lines = []
    for shard in cut:
        for file in shard_inputs({"inputs": inputs}, shard):
            with open(file.url, "rb") as source:
                source.seek(file.start)
                lines += [line for line in source.read(file.end - file.start).splitlines() if line.strip()]
    expected = [
        line for entry in inputs for line in (review_jsonl / entry["name"]).read_bytes().splitlines() if line.strip()
    ]
    assert lines == expected, "the shards' byte ranges cover every record once, in path order"
    with pytest.raises(Exception, match="602 non-empty shards"):
        shards(inputs, units, 602)
