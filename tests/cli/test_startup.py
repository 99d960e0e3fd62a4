"""The commands that run no pipeline import no Beam: each is run in a fresh Python, on a real run folder and job.

How soon they answer is ``benchmarks.cli_startup``'s to measure; what is checked here is what makes them fast
(Beam's import is most of a second), and that each still gives its answer.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from beamtrove.cli import _MODULES, _parser, main
from beamtrove.execution.jobs import prepare_job
from tests.conftest import make_warc_set, require

# Runs the command through beamtrove's main in this Python, then says which modules of interest it imported.
_PROBE = """
import json, sys
from beamtrove.cli import main
try:
    status = main(sys.argv[2:])
except SystemExit as done:  # --help
    status = done.code
imported = sorted({name.split(".")[0] for name in sys.modules} & {"apache_beam", "matplotlib"})
with open(sys.argv[1], "w") as out:
    json.dump({"status": status, "imported": imported}, out)
"""


@pytest.fixture(scope="module")
def looked_at(data_dir, tmp_path_factory) -> dict[str, str]:
    """A fineweb run over 40 real pages in 1 WARC file, and an elastic job over the same file, not yet run."""
    warcs = tmp_path_factory.mktemp("startup-warcs")
    make_warc_set(warcs, "--records", "40", "--files", "1", "--seed", "3")
    assets = [
        "--lid_model",
        str(require(data_dir / "models" / "lid176" / "lid.176.ftz")),
        "--url_blocklist",
        str(require(data_dir / "blocklists" / "ut1")),
    ]
    run = tmp_path_factory.mktemp("startup-run") / "out"
    inputs = f"{warcs}/*.warc.gz"
    assert main(["run", "fineweb", "--input", inputs, "--output", str(run), "--extractor", "resiliparse", *assets]) == 0
    job = tmp_path_factory.mktemp("startup-job") / "job"
    prepare_job(job, "fineweb", [inputs], 1, assets)
    (documents,) = (run / "documents").iterdir()
    return {"run": str(run), "job": str(job), "documents": str(documents)}


def _probe(tmp_path, *argv: str) -> dict:
    result = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(result), *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.exists(), done.stderr
    return {**json.loads(result.read_text()), "out": done.stdout, "err": done.stderr}


@pytest.mark.parametrize(
    ("argv", "status", "answer"),
    [
        (["--help"], 0, "elastic"),
        (["stats", "{run}"], 0, "write_documents"),
        (["inspect", "{run}", "--limit", "1"], 0, "[1] "),
        (["inspect", "{run}", "--excluded", "--limit", "1"], 0, "excluded  language_screen"),
        (["inspect", "{documents}", "--limit", "1", "--json"], 0, '"text"'),
        (["assets", "path"], 0, "lid"),
        (["elastic", "status", "--job-dir", "{job}"], 1, "pending"),
        (["elastic", "status", "--job-dir", "{job}", "--json"], 1, '"complete": false'),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_a_command_that_runs_no_pipeline_answers_without_importing_beam(looked_at, tmp_path, argv, status, answer):
    probed = _probe(tmp_path, *(argument.format(**looked_at) for argument in argv))
    assert (probed["status"], probed["imported"]) == (status, []), probed["err"]
    assert answer in probed["out"]


def test_a_report_is_drawn_without_beam_or_a_plotting_library(looked_at, tmp_path):
    page = tmp_path / "report.html"
    probed = _probe(tmp_path, "report", looked_at["run"], "--out", str(page))
    assert (probed["status"], probed["imported"]) == (0, []), probed["err"]
    assert page.read_text().count("<svg") == 1  # the funnel: the run computed no summary statistics


def test_every_command_of_the_tree_is_found_from_its_name_alone():
    (commands,) = _parser()._subparsers._group_actions
    assert list(commands.choices) == list(_MODULES)
    for name in _MODULES:
        (alone,) = _parser([name])._subparsers._group_actions
        assert name in alone.choices
