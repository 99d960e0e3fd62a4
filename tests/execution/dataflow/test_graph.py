"""``beamtrove dataflow graph``: the job the DataflowRunner would submit, built offline with its dry run."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import pathlib
import socket
import sys
import tarfile

import apache_beam
import pytest

from beamtrove import __version__
from beamtrove.cli import main
from tests.conftest import DATA, require

REPO = pathlib.Path(__file__).resolve().parents[3]
WARC = DATA / "warc" / "cc-main-2024-22_whirlwind.warc.gz"
LID_MODEL = DATA / "models" / "lid176" / "lid.176.ftz"
BLOCKLIST = DATA / "blocklists" / "ut1"
WORKER_IMAGE = "us-central1-docker.pkg.dev/my-project/beamtrove/beamtrove:test"
FILTERS = ("url_filter", "language_filter", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")


@contextlib.contextmanager
def _no_network():
    """Makes any attempt to resolve or reach a host fail loudly, and records it."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[:2])
        raise OSError("the network is off in this test")

    patch = pytest.MonkeyPatch()
    patch.setattr(socket, "getaddrinfo", refuse)
    patch.setattr(socket.socket, "connect", refuse)
    try:
        yield attempts
    finally:
        patch.undo()


def _graph(argv: list[str]) -> tuple[int, str, list]:
    out = io.StringIO()
    with _no_network() as attempts, contextlib.redirect_stdout(out):
        status = main(["dataflow", "graph", *argv])
    return status, out.getvalue(), attempts


@pytest.fixture(scope="module")
def fineweb(tmp_path_factory):
    """The fineweb job for one dump, with --setup_file and the beamtrove image for the workers."""
    root = tmp_path_factory.mktemp("graph")
    options = [
        f"--input={require(WARC)}",
        "--output=gs://beamtrove-offline/out",
        "--dump=CC-MAIN-2024-22",
        f"--lid_model={require(LID_MODEL)}",
        f"--url_blocklist={require(BLOCKLIST)}",
        f"--setup_file={REPO / 'setup.py'}",
        f"--sdk_container_image={WORKER_IMAGE}",
    ]
    status, printed, attempts = _graph(
        ["fineweb", "--output", str(root / "job.json"), "--staging-dir", str(root / "staging"), "--", *options]
    )
    assert status == 0
    return {
        "graph": json.loads((root / "job.json").read_text()),
        "printed": printed,
        "staging": root / "staging",
        "network_attempts": attempts,
    }


def test_runs_offline(fineweb):
    assert fineweb["network_attempts"] == []
    job = fineweb["graph"]["job"]
    assert job["type"] == "JOB_TYPE_BATCH"
    assert job["name"].startswith("beamapp-")
    assert "id" not in job  # never submitted


def test_steps_are_the_pipelines(fineweb):
    steps = fineweb["graph"]["steps"]

    assert [step["name"] for step in steps] == [
        "read",
        "add_dump",
        "url_filter",
        "write_excluded_url_filter",
        "language_screen",
        "write_excluded_language_screen",
        "extract",
        *(name for rule in FILTERS[1:] for name in (rule, f"write_excluded_{rule}")),
        "write_documents",
        "FlattenDeadLetters",
        "write_dead_letters",
        "FlattenWritten",
        "Publish",
    ]
    by_name = {step["name"]: step["transforms"] for step in steps}
    assert by_name["read"][0] == {"name": "read/Inputs/Impulse", "urn": "beam:transform:impulse:v1"}
    assert {"name": "FlattenDeadLetters", "urn": "beam:transform:flatten:v1"} in by_name["FlattenDeadLetters"]
    # Writing the documents gathers the temporary files of every worker: one shuffle.
    assert [t["name"] for t in by_name["write_documents"] if t["urn"] == "beam:transform:group_by_key:v1"] == [
        "write_documents/CollectTempFiles/CollectTempFiles/CombinePerKey/GroupByKey"
    ]
    assert "write_documents" in fineweb["printed"]
    # The last step waits for every writer, then moves the staged outputs into the output folder.
    assert {"name": "FlattenWritten", "urn": "beam:transform:flatten:v1"} in by_name["FlattenWritten"]
    assert "22 steps" in fineweb["printed"]


def test_pipeline_options_reach_the_job(fineweb):
    environment = fineweb["graph"]["job"]["environment"]
    options = environment["sdkPipelineOptions"]["options"]

    assert options["dump"] == "CC-MAIN-2024-22"
    assert options["input"] == [str(WARC)]
    assert options["lid_model"] == str(LID_MODEL)
    assert options["url_blocklist"] == str(BLOCKLIST)
    assert options["extractor"] == "trafilatura"
    assert options["language_threshold"] == 0.65
    assert options["runner"] == "DataflowRunner"
    assert (options["project"], options["region"]) == ("beamtrove-offline", "us-central1")
    assert options["setup_file"] == str(REPO / "setup.py")
    assert options["pipelineUrl"].startswith("gs://beamtrove-offline/tmp/beamapp-")
    assert options["pipelineUrl"].endswith("/pipeline.pb")
    assert 'dump = "CC-MAIN-2024-22"' in fineweb["printed"]
    # The workers run the given image, and the job says which Beam and Python built it.
    (pool,) = environment["workerPools"]
    assert pool["workerHarnessContainerImage"] == WORKER_IMAGE
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert environment["userAgent"] == {"name": f"Apache Beam Python {python} SDK", "version": apache_beam.__version__}


def test_setup_file_is_built_into_an_sdist_and_staged(fineweb):
    artifacts = {artifact["name"]: artifact for artifact in fineweb["graph"]["artifacts"]}
    sdist = artifacts["workflow.tar.gz"]
    staged = pathlib.Path(sdist["staged"])

    assert staged == fineweb["staging"] / "workflow.tar.gz"
    assert hashlib.sha256(staged.read_bytes()).hexdigest() == sdist["sha256"]
    assert staged.stat().st_size == sdist["size"]
    with tarfile.open(staged) as archive:
        members = set(archive.getnames())
        metadata = archive.extractfile(f"beamtrove-{__version__}/PKG-INFO").read().decode()
    for path in (
        "setup.py",
        "beamtrove/execution/dataflow/launch.py",
        "beamtrove/execution/flink_job.sbatch",
        "beamtrove/execution/jobs/array.sbatch",
        "beamtrove/pipelines/fineweb.py",
    ):
        assert f"beamtrove-{__version__}/{path}" in members
    assert f"Version: {__version__}" in metadata.splitlines()
    # The job lists it among the packages the workers install from the staging location.
    (pool,) = fineweb["graph"]["job"]["environment"]["workerPools"]
    packages = {package["name"]: package["location"] for package in pool["packages"]}
    assert packages["workflow.tar.gz"].startswith("storage.googleapis.com/beamtrove-offline/tmp/beamapp-")
    assert packages["workflow.tar.gz"].endswith("/workflow.tar.gz")
    assert sorted(path.name for path in fineweb["staging"].iterdir()) == sorted(artifacts)


def test_without_setup_file_nothing_of_beamtrove_is_staged(tmp_path):
    status, _printed, attempts = _graph(
        ["extract", "--output", str(tmp_path / "job.json"), "--", f"--input={require(WARC)}", "--output=gs://b-out/x"]
    )

    assert (status, attempts) == (0, [])
    graph = json.loads((tmp_path / "job.json").read_text())
    assert [step["name"] for step in graph["steps"]] == [
        "read",
        "extract",
        "write_documents",
        "FlattenDeadLetters",
        "write_dead_letters",
        "FlattenWritten",
        "Publish",
    ]
    assert "workflow.tar.gz" not in {artifact["name"] for artifact in graph["artifacts"]}
    assert all(artifact["staged"] is None for artifact in graph["artifacts"])
    # Beam's own Dataflow image unless another is given.
    (pool,) = graph["job"]["environment"]["workerPools"]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert pool["workerHarnessContainerImage"].endswith(f"/beam_python{python}_sdk:{apache_beam.__version__}")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["finweb", "--"], "Unknown pipeline 'finweb'"),
        (["extract", "--", "--runner=DirectRunner"], "The graph is Dataflow's: drop --runner=DirectRunner."),
        (["extract", "--", "--temp_location=/tmp/beam"], "Invalid GCS path (/tmp/beam)"),
        (["extract", "--", "--extract_timout=3"], "unknown options --extract_timout=3"),
        (["extract", "--", "--output=gs://b-out/x"], "No input given: pass --input"),
        (
            ["extract", "--", "--dedup=exact"],
            "--dedup is an option of the dedup and dedup_index pipeline, not of extract",
        ),
    ],
)
def test_refusals(argv, message, capsys):
    status, printed, attempts = _graph(argv)

    assert (status, printed, attempts) == (2, "", [])
    assert message in capsys.readouterr().err
