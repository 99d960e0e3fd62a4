"""Runs whose inputs and outputs are on object stores, each a real server in its own process (tests/servers.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.servers import ObjectStore

_RACER = """
import sys
from beamtrove.execution.output_lock import OutputInUse, lock_output
from beamtrove.fs import filesystem

filesystem(sys.argv[1])  # connected before the race starts
print("ready", flush=True)
sys.stdin.readline()
try:
    lock_output(sys.argv[1])
    print("won", flush=True)
except OutputInUse as refused:
    print("refused", refused, flush=True)
sys.stdin.readline()  # the winner holds the lock until both have tried
"""


@pytest.fixture(params=["gcs_server", "s3_server"])
def store(request) -> ObjectStore:
    """Each object store server in turn."""
    return request.getfixturevalue(request.param)


def _env(store: ObjectStore) -> dict[str, str]:
    return {**os.environ, **store.env}


def test_two_processes_racing_for_the_lock_of_an_output_on_a_store_one_takes_it(store):
    output = f"{store.bucket()}/out"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, output],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_env(store),
        )
        for _ in range(2)
    ]
    try:
        assert [racer.stdout.readline() for racer in racers] == ["ready\n", "ready\n"]
        for racer in racers:
            racer.stdin.write("go\n")
            racer.stdin.flush()
        said = [racer.stdout.readline() for racer in racers]
    finally:
        for racer in racers:
            racer.communicate("done\n", timeout=60)
    assert sorted(said)[1] == "won\n", said
    winner = racers[said.index("won\n")]
    assert sorted(said)[0].startswith(
        f"refused --output {output} is in use by another run (host {socket.gethostname()}, pid {winner.pid}, started "
    ), said
    assert [racer.returncode for racer in racers] == [0, 0]
