"""Reading an index manifest and listing its folder: refusals of one line naming the file."""

from __future__ import annotations

import json
import re

import pytest

from beamtrove.fs import filesystem
from beamtrove.options import ConfigurationError
from beamtrove.transforms.manifests import file_sizes, is_count, load_manifest

REBUILD = "rebuild the index with `beamtrove run some_index`"


def _load(path, problem=lambda manifest: None):
    fs, local = filesystem(str(path))
    return load_manifest(
        str(path), fs, local, format_name="some-index", version=3, index="some index", rebuild=REBUILD, problem=problem
    )


@pytest.mark.parametrize(
    ("content", "refusal"),
    [
        ('{"format": "some-index", "version": 3, "na', "is not JSON (unexpected end of data"),
        ('["some-index", 3]', "is not a version 3 some index; rebuild"),
        ('{"format": "some-index", "version": 2}', "is not a version 3 some index; rebuild"),
        ('{"format": "other-index", "version": 3}', "is not a version 3 some index; rebuild"),
    ],
)
def test_a_manifest_not_of_the_format_and_version_is_refused_naming_it(tmp_path, content, refusal):
    (tmp_path / "index.json").write_text(content)
    with pytest.raises(ConfigurationError, match=re.escape(f"{tmp_path / 'index.json'} {refusal}")) as refused:
        _load(tmp_path / "index.json")
    assert "\n" not in str(refused.value)


def test_a_manifest_is_returned_unless_its_fields_have_a_problem(tmp_path):
    manifest = {"format": "some-index", "version": 3, "files": 2}
    (tmp_path / "index.json").write_text(json.dumps(manifest))
    assert _load(tmp_path / "index.json") == manifest
    with pytest.raises(ConfigurationError, match=re.escape("index.json is damaged: it lacks a name; rebuild the")):
        _load(tmp_path / "index.json", lambda found: None if "name" in found else "it lacks a name")


def test_counts_and_file_sizes(tmp_path):
    assert [is_count(value) for value in (0, 7, -1, True, 2.0, "3", None)] == [True, True] + [False] * 5
    (tmp_path / "kind").mkdir()
    (tmp_path / "kind" / "part-0").write_bytes(b"12345")
    (tmp_path / "index.json").write_text("{}")
    fs, folder = filesystem(str(tmp_path))
    assert file_sizes(fs, folder) == {"kind/part-0": 5, "index.json": 2}
