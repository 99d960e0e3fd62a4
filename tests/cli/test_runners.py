"""``beamtrove runners`` and ``beamtrove slurm``: what their commands print, write and refuse."""

from __future__ import annotations

import json

import yaml

from beamtrove.cli import main
from beamtrove.execution.runner_parts import beam_version, part_path


def test_path_lists_each_part_as_text_or_json(tmp_path, capsys):
    runners = tmp_path / "runners"
    runners.mkdir()
    (runners / "runners.json").write_text(json.dumps({"parts": {"prism": {"status": "failed", "error": "no go"}}}))
    assert main(["runners", "path", "--dir", str(runners)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"runners directory {runners} (Beam {beam_version()})"
    assert lines[1].split() == ["prism", "failed", str(part_path("prism", runners))]
    assert lines[2].strip() == "last attempt: no go"
    assert [line.split()[:2] for line in lines[3:]] == [["flink-job-server", "missing"], ["flink-dist", "missing"]]
    assert main(["runners", "path", "--dir", str(runners), "--json"]) == 0
    states = json.loads(capsys.readouterr().out)
    assert states["parts"]["prism"] == {"status": "failed", "path": str(part_path("prism", runners)), "error": "no go"}


def test_flink_config_writes_the_configuration_it_is_given(tmp_path, capsys):
    conf = tmp_path / "conf"
    argv = ["runners", "flink", "config", "--conf-dir", str(conf), "--jobmanager", "node-01", "--slots", "4"]
    assert main([*argv, "-D", "heartbeat.timeout=120000", "--tmp-dir", str(tmp_path / "t")]) == 0
    assert capsys.readouterr().out.strip() == str(conf / "config.yaml")
    settings = yaml.safe_load((conf / "config.yaml").read_text())
    assert (settings["jobmanager.rpc.address"], settings["taskmanager.numberOfTaskSlots"]) == ("node-01", 4)
    assert (settings["heartbeat.timeout"], settings["io.tmp.dirs"]) == ("120000", str(tmp_path / "t"))
    assert main([*argv, "-D", "no-equals-sign"]) == 2
    assert "-D takes key=value, not 'no-equals-sign'" in capsys.readouterr().err


def test_flink_processes_and_setup_refuse_what_cannot_work(tmp_path, capsys):
    argv = ["runners", "flink", "taskmanager", "--conf-dir", str(tmp_path), "--log-file", str(tmp_path / "tm.log")]
    assert main([*argv, "--flink-home", str(tmp_path / "nowhere")]) == 2
    assert f"beamtrove: error: {tmp_path / 'nowhere'} is no Flink distribution" in capsys.readouterr().err
    assert main(["runners", "setup", "--runner", "prism", "--job-server-jar", "x.jar", "--dir", str(tmp_path)]) == 2
    assert "--job-server-jar needs --runner flink, flink-job-server or all" in capsys.readouterr().err
    assert main(["slurm", "node", "--flink-home", "x", "--job-dir", str(tmp_path), "--", "--input", "y"]) == 2
    assert "`beamtrove slurm node` takes no pipeline options after --." in capsys.readouterr().err
