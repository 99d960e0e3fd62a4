"""Input matching: globs, directories, URLs, names holding glob characters, run outputs and errors before any work."""

from __future__ import annotations

import http.server
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading

import fsspec
import pytest

from beamtrove.fs import (
    input_folder,
    is_local,
    match_inputs,
    read_json,
    read_json_record,
    staging_file,
    write_json,
    write_local_atomically,
    write_url_atomically,
)


def test_globs_directories_and_files_sorted_and_deduplicated(data_dir):
    warc = data_dir / "warc"
    files = match_inputs(
        [str(warc / "dolma_*.warc.gz"), str(warc / "warcio-edge-cases"), str(warc / "dolma_wget_sample-0000.warc.gz")],
        suffixes=(".arc.gz",),
    )
    assert [f.name for f in files] == [
        "dolma_wget_sample-0000.warc.gz",
        "dolma_wget_sample-0001.warc.gz",
        "example.arc.gz",
    ]
    assert [f.url for f in files] == sorted(f.url for f in files)
    assert files[0].size == (warc / "dolma_wget_sample-0000.warc.gz").stat().st_size


def test_names_are_relative_to_where_the_pattern_starts(data_dir):
    files = match_inputs(str(data_dir / "warc" / "*" / "example.warc.gz"))
    assert [f.name for f in files] == ["warcio-edge-cases/example.warc.gz"]


def test_memory_urls_keep_their_protocol():
    fsspec.filesystem("memory").pipe("memory://beamtrove-fs-test/a/b.jsonl", b"{}\n")
    [file] = match_inputs("memory://beamtrove-fs-test/**/*.jsonl")
    assert (file.url, file.name, file.size) == ("memory:///beamtrove-fs-test/a/b.jsonl", "a/b.jsonl", 3)


def test_errors_name_what_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"'.*absent' does not exist"):
        match_inputs(str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="No files match"):
        match_inputs(str(tmp_path / "*.jsonl"))
    (tmp_path / "notes.txt").write_text("not a dataset")
    with pytest.raises(FileNotFoundError, match=r"No files ending in \.jsonl are under the directory"):
        match_inputs(str(tmp_path), suffixes=(".jsonl",))


def _review_lines(movie_reviews, count: int) -> str:
    return "".join(json.dumps({"text": text}) + "\n" for text in list(movie_reviews.values())[:count])


def test_a_file_or_folder_named_outright_is_read_as_named_whatever_its_name_holds(movie_reviews, tmp_path):
    (tmp_path / "crawl[1].jsonl").write_text(_review_lines(movie_reviews, 3))
    # What the names would match as globs: crawl1.jsonl, and "run o" ("[old]" being one of o, l, d).
    (tmp_path / "crawl1.jsonl").write_text(_review_lines(movie_reviews, 1))
    for folder in ("run [old]", "run o"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "part.jsonl").write_text(_review_lines(movie_reviews, 2))

    [file] = match_inputs(str(tmp_path / "crawl[1].jsonl"))
    assert (file.name, file.size) == ("crawl[1].jsonl", (tmp_path / "crawl[1].jsonl").stat().st_size)
    [part] = match_inputs(str(tmp_path / "run [old]"), suffixes=(".jsonl",))
    assert (part.url, part.name) == (str(tmp_path / "run [old]" / "part.jsonl"), "part.jsonl")
    assert input_folder(str(tmp_path / "run [old]")) == str(tmp_path / "run [old]")

    # A name that exists nowhere as it is stays a glob.
    (tmp_path / "crawl[1].jsonl").unlink()
    assert [f.name for f in match_inputs(str(tmp_path / "crawl[1].jsonl"))] == ["crawl1.jsonl"]
    assert [f.name for f in match_inputs(str(tmp_path / "run [ox]" / "*.jsonl"))] == ["run o/part.jsonl"]


@pytest.mark.parametrize("pattern", ["", " ", "\t\n"])
def test_an_empty_input_path_is_refused_not_read_as_the_current_directory(
    movie_reviews, tmp_path, monkeypatch, pattern
):
    (tmp_path / "reviews.jsonl").write_text(_review_lines(movie_reviews, 2))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"An input path is empty .* would read the current directory"):
        match_inputs(pattern, suffixes=(".jsonl",))
    with pytest.raises(FileNotFoundError, match="An input path is empty"):
        match_inputs([str(tmp_path / "reviews.jsonl"), pattern], suffixes=(".jsonl",))


def _run_output(folder, kept: str | None, movie_reviews) -> None:
    """What a beamtrove run leaves in ``folder``: its stats, what it set aside and, unless None, its documents."""
    for name in ("excluded/c4_quality/part-00000.jsonl.gz", "dead_letters/part-00000.jsonl", kept):
        if name:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(_review_lines(movie_reviews, 2))
    (folder / "stats.json").write_text("{}")
    (folder / "summary_stats" / "doc").mkdir(parents=True)
    (folder / "summary_stats" / "doc" / "metric.json.gz").write_text("{}")


def test_a_run_output_inside_a_folder_stands_for_the_documents_its_run_kept(movie_reviews, tmp_path):
    suffixes = (".jsonl", ".jsonl.gz", ".json.gz")
    _run_output(tmp_path / "CC-MAIN-2024-10", "documents/part-00000.jsonl.gz", movie_reviews)
    _run_output(tmp_path / "CC-MAIN-2024-18", None, movie_reviews)
    _run_output(tmp_path / "converted", "part-00000.jsonl.gz", movie_reviews)
    # Not a run's output (no stats.json beside it): a dataset's own excluded/ folder is data.
    (tmp_path / "dataset" / "excluded").mkdir(parents=True)
    (tmp_path / "dataset" / "excluded" / "rows.jsonl").write_text(_review_lines(movie_reviews, 1))

    assert [f.name for f in match_inputs(str(tmp_path), suffixes)] == [
        "CC-MAIN-2024-10/documents/part-00000.jsonl.gz",
        "converted/part-00000.jsonl.gz",
        "dataset/excluded/rows.jsonl",
    ]
    # Named outright, what a run set aside is read.
    assert [f.name for f in match_inputs(str(tmp_path / "CC-MAIN-2024-18" / "excluded"), suffixes)] == [
        "c4_quality/part-00000.jsonl.gz"
    ]


def test_a_run_output_that_kept_nothing_is_an_empty_input_with_a_warning(movie_reviews, tmp_path, caplog):
    suffixes = (".jsonl", ".jsonl.gz")
    kept_nothing = tmp_path / "CC-MAIN-2024-18"
    _run_output(kept_nothing, None, movie_reviews)
    # Runs that kept nothing in a folder, as --dump runs leave them: the folder is an empty input too.
    _run_output(tmp_path / "dumps" / "CC-MAIN-2024-22", None, movie_reviews)
    (tmp_path / "reviews.jsonl").write_text(_review_lines(movie_reviews, 2))

    with caplog.at_level(logging.WARNING, logger="beamtrove.fs"):
        assert match_inputs(str(kept_nothing), suffixes) == []
        assert match_inputs(str(tmp_path / "dumps"), suffixes) == []
        assert [f.name for f in match_inputs([str(kept_nothing), str(tmp_path / "reviews.jsonl")], suffixes)] == [
            "reviews.jsonl"
        ]
        # Matching again what was said, as a run does when it starts.
        assert match_inputs(str(kept_nothing), suffixes, warn_empty_runs=False) == []
    said = (
        f"Input {str(kept_nothing)!r} is the output of a beamtrove run that kept no document, so it is an empty input: "
        f"what it set aside (dead_letters/, excluded/, summary_stats/) is not read; name such a folder "
        f"({kept_nothing / 'dead_letters'}) to read it."
    )
    dumps = tmp_path / "dumps"
    dump = "CC-MAIN-2024-22"
    assert caplog.messages == [
        said,
        f"Input {str(dumps)!r} holds only the outputs of beamtrove runs that kept no document, so it is an empty "
        f"input: what it set aside ({dump}/dead_letters/, {dump}/excluded/, {dump}/summary_stats/) is not read; "
        f"name such a folder ({dumps / dump / 'dead_letters'}) to read it.",
        said,
    ]

    # Only a run's output: an empty folder, or a glob matching nothing, is refused as before.
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"No files ending in \.jsonl, \.jsonl\.gz are under the directory"):
        match_inputs(str(tmp_path / "empty"), suffixes)
    with pytest.raises(FileNotFoundError, match="No files match"):
        match_inputs(str(tmp_path / "*.parquet"), suffixes)
    # A run that kept documents of another format kept something: asked for Parquet, it holds none.
    _run_output(tmp_path / "converted", "part-00000.jsonl.gz", movie_reviews)
    with pytest.raises(FileNotFoundError, match=r"No files ending in \.parquet are under the directory"):
        match_inputs(str(tmp_path / "converted"), (".parquet",))


def test_the_url_writer_places_a_whole_file_at_any_url_leaving_no_temporary(tmp_path):
    url = "memory://fs-test/run/stats.json"
    write_url_atomically(url, b'{"documents": 1}\n')
    write_url_atomically(url, b'{"documents": 2}\n')
    memory = fsspec.filesystem("memory")
    assert memory.cat(url) == b'{"documents": 2}\n'
    assert memory.ls("memory://fs-test/run", detail=False) == ["/fs-test/run/stats.json"]

    local = tmp_path / "new" / "report.html"
    write_url_atomically(str(local), b"<html></html>")
    assert local.read_bytes() == b"<html></html>"
    assert [path.name for path in local.parent.iterdir()] == ["report.html"]


def test_the_local_writer_replaces_a_file_whole_and_a_staging_file_goes_unless_renamed(tmp_path):
    path = tmp_path / "attempt.json"
    write_local_atomically(path, b'{"state": "running"}')
    write_local_atomically(str(path), b'{"state": "done"}')
    assert path.read_bytes() == b'{"state": "done"}'
    assert [p.name for p in tmp_path.iterdir()] == ["attempt.json"]

    with staging_file(tmp_path / "done.json", b"{}") as staging:
        assert staging.parent == tmp_path and staging.name.startswith(".done.json.") and staging.read_bytes() == b"{}"
    assert [p.name for p in tmp_path.iterdir()] == ["attempt.json"]
    # The local writer places files in a folder that exists; it does not make one.
    with pytest.raises(FileNotFoundError):
        write_local_atomically(tmp_path / "missing" / "attempt.json", b"{}")


def test_json_records_are_read_whole_or_refused_with_the_file_named(tmp_path):
    stats = tmp_path / "stats.json"
    write_json({"documents": 3}, str(stats))
    assert read_json(stats) == read_json_record(stats) == {"documents": 3}
    write_url_atomically("memory://fs-test/json/done.json", b'{"status": "succeeded"}')
    assert read_json("memory://fs-test/json/done.json") == {"status": "succeeded"}
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json")
    # What a writer cut short, a list, bytes that are not UTF-8: each named as damaged, with what it holds.
    for content, problem in (
        (b'{"documents": ', "not JSON: "),
        (b"[1, 2]", "a JSON list where an object belongs"),
        (b"\xff\xfe{}", "not JSON: "),
    ):
        stats.write_bytes(content)
        with pytest.raises(ValueError, match=re.escape(f"{stats} is damaged ({problem}")):
            read_json(stats)
        # A record another process is still writing reads as not there yet.
        assert read_json_record(stats) is None
    assert read_json_record(tmp_path / "missing.json") is None


@pytest.mark.parametrize(
    ("url", "local"),
    [("/data/lists", True), ("relative/lists", True), ("file:///data/lists", True), ("gs://bucket/lists", False),
     ("s3://bucket/lists", False), ("memory://lists", False), ("https://host/lists", False)],
)  # fmt: skip
def test_is_local_tells_by_the_protocol(url, local):
    assert is_local(url) is local


# `beamtrove run fineweb --dump ... --cc_base s3://commoncrawl` reads the dump's paths file on S3: each way its file
# system fails is one line, exit 2, and the run leaves no output folder behind (it left an empty one).
_DUMP = "s3://commoncrawl/crawl-data/CC-MAIN-2024-22/warc.paths.gz"
# Run as a command: with s3fs taken away, as where the s3 extra is not installed.
_COMMAND = """
import sys
if sys.argv[1] == "without-s3fs":
    sys.modules["s3fs"] = None
from beamtrove.cli import main
dump = ["--dump", "CC-MAIN-2024-22", "--cc_base", "s3://commoncrawl"]
sys.exit(main(["run", "fineweb", *dump, "--output", sys.argv[2]]))
"""


def _dump_run(tmp_path, *, s3fs: bool = True, **environment: str) -> subprocess.CompletedProcess:
    # No credentials but those given; botocore neither asks the instance metadata service nor retries.
    quiet = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    quiet |= {"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull, "AWS_MAX_ATTEMPTS": "1"}
    quiet |= {"AWS_SHARED_CREDENTIALS_FILE": os.devnull, **environment}
    command = [sys.executable, "-c", _COMMAND, "with-s3fs" if s3fs else "without-s3fs", str(tmp_path / "out")]
    return subprocess.run(command, capture_output=True, text=True, env=quiet, timeout=300, check=False)


def test_dump_without_the_s3_extra_names_it(tmp_path):
    # It said "Install s3fs to access S3".
    result = _dump_run(tmp_path, s3fs=False)
    assert (result.returncode, result.stderr) == (
        2,
        f"beamtrove: error: Reading {_DUMP} needs a file system that is not installed (Install s3fs to access S3): "
        "pip install 'beamtrove[s3]'.\n",
    )
    assert not (tmp_path / "out").exists()


@pytest.fixture
def refused_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def http_server():
    """A real HTTP server on loopback that is no S3 endpoint: it answers every request 404 or 501."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "beamtrove-test", "AWS_SECRET_ACCESS_KEY": "beamtrove-test"}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["no credentials", "connection refused", "no S3 endpoint"])
def test_dump_with_s3fs_that_cannot_reach_its_files_is_one_line(case, tmp_path, refused_port, request):
    # No credentials: 94 lines of traceback; connection refused: 165; an endpoint that is no S3: "No files match
    # ... check the path and the pattern", as if the dump had no files.
    pytest.importorskip("s3fs", reason="the s3 extra (pip install 'beamtrove[s3]') is not installed")
    cannot_read = f"Cannot read {_DUMP}, the list of CC-MAIN-2024-22's files"
    check = "Check --cc_base, the network and the credentials it needs."
    if case == "no credentials":
        environment, message = {}, f"{cannot_read}: NoCredentialsError: Unable to locate credentials. {check}"
    elif case == "connection refused":
        endpoint = f"http://127.0.0.1:{refused_port}"
        environment = {"AWS_ENDPOINT_URL": endpoint, **_CREDENTIALS}
        message = (
            f'{cannot_read}: EndpointConnectionError: Could not connect to the endpoint URL: "{endpoint}/'
            f'commoncrawl/crawl-data/CC-MAIN-2024-22/warc.paths.gz". {check}'
        )
    else:
        environment = {"AWS_ENDPOINT_URL": request.getfixturevalue("http_server"), **_CREDENTIALS}
        message = (
            f"Common Crawl has no dump CC-MAIN-2024-22 under s3://commoncrawl: {_DUMP} is not found. Check --dump "
            "(dump names are listed at https://data.commoncrawl.org/crawl-data/index.html) and --cc_base."
        )
    result = _dump_run(tmp_path, **environment)
    assert (result.returncode, result.stderr) == (2, f"beamtrove: error: {message}\n")
    assert not (tmp_path / "out").exists()


def test_gs_urls_on_a_gcs_emulator_skip_gcsfs_s_grpc_bucket_probe(gcs_server):
    # gcsfs's default file system first asks each bucket's type over gRPC with TLS; a plain-HTTP emulator never
    # answers, and each call waited 60 s for it.
    probe = (
        "import fsspec; from beamtrove.fs import filesystem, open_url; "
        "print(fsspec.get_filesystem_class('gs').__module__); "
        "print(type(filesystem('gs://bucket')[0]).__module__, type(open_url('gs://bucket/file').fs).__module__)"
    )
    env = {name: value for name, value in os.environ.items() if name != "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"}
    emulated = subprocess.run(
        [sys.executable, "-c", probe], env={**env, **gcs_server.env}, capture_output=True, text=True, check=True
    )
    assert emulated.stdout.split() == ["gcsfs.extended_gcsfs", "gcsfs.core", "gcsfs.core"]
