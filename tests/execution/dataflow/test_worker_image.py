"""The worker image, built here from the repository's Dockerfile, running beamtrove as Dataflow's workers run it.

``beamtrove dataflow build-image --local-base`` builds the image on a base made
from Debian packages (no container registry is reachable here). Every command
then runs inside the image, on the host network, as a Flex Template launch
does: the launcher and the workers are the same image.

Prism 2.77's DOCKER environment starts worker containers that mount nothing
but a GCP credentials file, so they cannot read local inputs or write a local
output: pipelines whose files must be shared run their workers in the image
through Beam's worker pool (what the image's boot program runs for ``--worker_pool``,
which starts each worker with the boot program, as Dataflow does), in a
container that mounts the test's folder at the same path; Prism's own DOCKER
environment runs a pipeline that needs no files, and a fineweb run whose
output the workers cannot share, which must fail in one line.
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

import beamtrove
from beamtrove.cli import main
from beamtrove.execution.runner_parts import default_runners_dir, part_path, part_present
from tests.conftest import make_warc_set, require
from tests.execution.conftest import free_port

pytestmark = pytest.mark.slow

REPO = pathlib.Path(__file__).resolve().parents[3]
TAG = "beamtrove-worker:test"
_POOL = "beamtrove-test-worker-pool"
# The image's boot program, which starts each SDK worker.
_BOOT = "/opt/apache/beam/boot"


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built through the command users run."""
    if not _docker_answers():
        pytest.skip("no Docker daemon answers here (Debian: apt-get install docker.io; then start dockerd)")
    if shutil.which("debootstrap") is None or shutil.which("go") is None or os.geteuid() != 0:
        pytest.skip("the local base needs root, debootstrap and go")
    if not part_present("prism"):
        pytest.skip("no Prism in the runners directory: `beamtrove runners setup --runner prism` builds it")
    assert main(["dataflow", "build-image", "--tag", TAG, "--local-base", "--context", str(REPO)]) == 0
    return TAG


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> pathlib.Path:
    """A folder every container mounts at the same path: the inputs, and the runs' outputs."""
    return tmp_path_factory.mktemp("shared")


def _in_image(image: str, shared: pathlib.Path, *args: str, entrypoint: str = "beamtrove", mounts: tuple = (),
              docker_socket: bool = False) -> subprocess.CompletedProcess:  # fmt: skip
    """A command run in the image, as a Flex Template's launcher runs: on the host network, with Prism at hand."""
    runners = default_runners_dir()
    command = ["docker", "run", "--rm", "--network", "host", "--volume", f"{shared}:{shared}"]
    # Writable: Beam's PrismRunner sets the execute bit of the binary it is given before each run.
    command += ["--volume", f"{runners}:{runners}", "--env", f"BEAMTROVE_RUNNERS={runners}"]
    for source, target in mounts:
        command += ["--volume", f"{source}:{target}:ro"]
    if docker_socket:
        # Prism starts the DOCKER environment's containers through the host's daemon.
        command += ["--volume", "/var/run/docker.sock:/var/run/docker.sock"]
    command += ["--entrypoint", entrypoint, image, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def worker_pool(image, shared):
    """Beam's worker pool in the image, serving the host network: ``--environment_config`` of EXTERNAL runs.

    It runs what the image's boot program runs for ``--worker_pool`` (Beam's pool, starting each worker with the
    boot program), on a free port: the boot program's fixed 50000 lies in the range the kernel gives other
    sockets, and in one CI run the pool never listened there.
    """
    subprocess.run(["docker", "rm", "--force", _POOL], capture_output=True, check=False)
    port = free_port()
    # Not --rm: the log of a pool that ended stays readable.
    command = ["docker", "run", "--detach", "--network", "host", "--name", _POOL, "--volume", f"{shared}:{shared}"]
    command += ["--entrypoint", "python", image, "-m", "apache_beam.runners.worker.worker_pool_main"]
    subprocess.run([*command, f"--service_port={port}", f"--container_executable={_BOOT}"], check=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("localhost", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or not _running(_POOL):
                logs = subprocess.run(["docker", "logs", _POOL], capture_output=True, text=True, check=False)
                pytest.fail(f"the worker pool did not listen on port {port}:\n{logs.stderr[-3000:]}")
            time.sleep(0.2)
    yield f"localhost:{port}"
    subprocess.run(["docker", "rm", "--force", _POOL], capture_output=True, check=False)


def _running(container: str) -> bool:
    state = ["docker", "inspect", "--format", "{{.State.Running}}", container]
    return subprocess.run(state, capture_output=True, text=True, check=False).stdout.strip() == "true"


def _on_pool_workers(pool: str) -> list[str]:
    return ["--runner", "PrismRunner", "--environment_type", "EXTERNAL", "--environment_config", pool]


@pytest.fixture(scope="module")
def warcs(shared) -> pathlib.Path:
    """A WARC set with faults (a binary payload, an undecodable page, a cut file), in the shared folder."""
    folder = shared / "warcs"
    make_warc_set(folder, "--records", "160", "--files", "3", "--faults", "--seed", "7")
    return folder


@pytest.fixture(scope="module")
def runs(image, shared, warcs, worker_pool, data_dir) -> dict[str, dict[str, pathlib.Path]]:
    """fineweb on the faulty WARC set, dedup and tokenize of what it kept: each on the DirectRunner and on Prism
    with its workers in the image, every command run in the image."""
    tokenizer = shared / "tokenizer.json"
    shutil.copy(require(data_dir / "tokenizers" / "gpt2" / "tokenizer.json"), tokenizer)
    outputs = {}
    for runner, options in (("direct", []), ("prism", _on_pool_workers(worker_pool))):
        out = {name: shared / runner / name for name in ("fineweb", "dedup", "tokenize")}
        commands = {
            "fineweb": ["run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(out["fineweb"])],
            "dedup": ["run", "dedup", "--input", str(shared / "direct" / "fineweb" / "documents"),
                      "--output", str(out["dedup"]), "--dedup", "exact,minhash"],
            "tokenize": ["run", "tokenize", "--input", str(shared / "direct" / "fineweb" / "documents"),
                         "--output", str(out["tokenize"]), "--tokenizer", str(tokenizer), "--num_shards", "2"],
        }  # fmt: skip
        for name, command in commands.items():
            ran = _in_image(image, shared, *command, *options)
            assert ran.returncode == 0, f"{runner} {name}:\n{ran.stderr[-3000:]}"
        outputs[runner] = out
    return outputs


def _contents(folder: pathlib.Path) -> dict[str, bytes]:
    """Every file of a run folder but its stats and report, decompressed, by name."""
    contents = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in ("stats.json", "report.html"):
            data = path.read_bytes()
            contents[str(path.relative_to(folder))] = gzip.decompress(data) if path.suffix == ".gz" else data
    return contents


def _sorted_lines(folder: pathlib.Path) -> dict[str, list[bytes]]:
    return {name: sorted(data.splitlines()) for name, data in _contents(folder).items()}


def _counters(folder: pathlib.Path, *, but_bytes: bool = False) -> dict[str, dict]:
    steps = json.loads((folder / "stats.json").read_text())["steps"]
    return {
        name: {counter: value for counter, value in step["counters"].items() if not (but_bytes and counter == "bytes")}
        for name, step in steps.items()
    }


@pytest.mark.parametrize("pipeline", ["fineweb", "dedup", "tokenize"])
def test_prism_with_workers_in_the_image_writes_what_the_direct_runner_writes(runs, pipeline):
    direct, prism = runs["direct"][pipeline], runs["prism"][pipeline]
    if pipeline == "dedup":
        # Rows leave dedup's shuffles in the order the runner hands them over: the same rows in the same files,
        # compressed to other sizes.
        assert _sorted_lines(prism) == _sorted_lines(direct)
        assert _counters(prism, but_bytes=True) == _counters(direct, but_bytes=True)
    else:
        assert _contents(prism) == _contents(direct)
        assert _counters(prism) == _counters(direct)
    if pipeline == "fineweb":
        # The faults reached the workers: dead letters (a binary payload, an undecodable page, the cut file).
        assert (direct / "dead_letters").is_dir() and _counters(direct)["read"]["out"] > 100
    if pipeline == "tokenize":
        assert len(list(direct.rglob("*.ds"))) == 2


_VERSIONS = """
import json, os, sys
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

def where(_):
    import platform, apache_beam, beamtrove
    from beamtrove.assets import default_lid_model, default_url_blocklist
    return (platform.python_version(), apache_beam.__version__, beamtrove.__version__,
            os.path.isfile(default_lid_model()), os.path.isdir(default_url_blocklist()), os.path.exists("/.dockerenv"))

launcher = where(None)
options = ["--runner", "PrismRunner", "--prism_location", sys.argv[1], "--environment_type", "DOCKER",
           "--environment_config", sys.argv[2]]
with beam.Pipeline(options=PipelineOptions(options)) as pipeline:
    assert_that(pipeline | beam.Create(range(8)) | beam.Map(where) | beam.Distinct(), equal_to([launcher]))
print(json.dumps(launcher))
"""


def test_prisms_docker_environment_runs_workers_with_the_launchers_python_beam_beamtrove_and_assets(image, shared):
    # The workers' (Python, Beam, beamtrove, the default model and lists there, in a container) must equal the
    # launcher's, or the pipeline's assertion fails the job.
    script = shared / "versions.py"
    script.write_text(_VERSIONS)
    ran = _in_image(image, shared, str(script), str(part_path("prism")), image, entrypoint="python", docker_socket=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    python, beam, version, has_model, has_lists, in_container = json.loads(ran.stdout.strip().splitlines()[-1])
    assert (has_model, has_lists, in_container) == (True, True, True)
    assert python.startswith("3.11.") and beam == "2.77.0" and version == beamtrove.__version__


def test_a_worker_without_a_model_the_launcher_has_fails_the_run_in_one_line(
    image, shared, warcs, worker_pool, data_dir
):
    # The launcher has the model (mounted for it alone); the workers, in the pool's container, do not.
    model = require(data_dir / "models" / "lid176" / "lid.176.ftz")
    ran = _in_image(
        image, shared, "run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(shared / "missing"),
        "--lid_model", "/launcher-only/lid.176.ftz",
        *_on_pool_workers(worker_pool), mounts=[(model.parent, "/launcher-only")],
    )  # fmt: skip
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert ran.stderr.strip().splitlines()[-1] == (
        "beamtrove: error: The language-ID model /launcher-only/lid.176.ftz (--lid_model) is not on the worker that "
        "needs it, though the machine that built the job has it: workers read it from their own file system. Put it "
        "in the worker image (the image `beamtrove dataflow build-image` builds holds `beamtrove assets fetch`'s), "
        "or give a path every worker reads."
    )
    assert not (shared / "missing").exists()


def test_workers_that_cannot_share_the_output_fail_the_run_in_one_line(image, shared, warcs):
    # A DOCKER environment's workers see neither the inputs nor the output folder: they write on their own disks.
    output = shared / "unshared"
    ran = _in_image(
        image, shared, "run", "fineweb", "--input", str(warcs / "*.warc.gz"), "--output", str(output),
        "--runner", "PrismRunner", "--environment_type", "DOCKER", "--environment_config", image, docker_socket=True,
    )  # fmt: skip
    assert ran.returncode == 2, ran.stderr[-3000:]
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith(f"beamtrove: error: The workers wrote 1 file, of which 0 reached {output}: "), last
    assert not output.exists()


def test_the_launchers_defaults_name_the_assets_in_the_image(image, shared):
    ran = _in_image(image, shared, "assets", "path")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [
        "lid176", "present", "/opt/beamtrove/assets/lid176/lid.176.ftz", "ut1", "present", "/opt/beamtrove/assets/ut1",
        "word_tokenizers", "present", "/opt/beamtrove/assets/word_tokenizers/tokenizer_assignment.csv",
    ]  # fmt: skip
