"""Child processes forked or started anew, in a process of their own: a test runner's threads would decide for it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Runs in a new interpreter: argv = the log file, then "thread" to have a second thread running.
_CHILDREN = textwrap.dedent(
    """
    import pathlib, signal, sys, threading, time
    import beamtrove.processes
    from beamtrove.processes import PythonChild

    log = pathlib.Path(sys.argv[1])
    if sys.argv[2:] == ["thread"]:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()

    def target():
        # A forked child has this process's modules, and its own exit handlers.
        print("forked", "beamtrove.processes" in sys.modules, flush=True)
        return 3

    command = [sys.executable, "-c", "import sys; print('new interpreter', flush=True); sys.exit(4)"]
    child = PythonChild(target, command, output=log)
    print(child.forked, child.wait(timeout=60), log.read_text().strip())
    sleeper = PythonChild(lambda: time.sleep(60), [sys.executable, "-c", "import time; time.sleep(60)"])
    assert sleeper.wait(0.2) is None
    sleeper.terminate()
    print(sleeper.wait(timeout=60) == -signal.SIGTERM)
    """
)


def _children(tmp_path, *args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", _CHILDREN, str(tmp_path / "child.log"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.splitlines()


def test_a_child_is_forked_with_the_modules_of_a_process_running_no_other_thread(tmp_path):
    assert _children(tmp_path) == ["True 3 forked True", "True"]


def test_a_child_of_a_process_with_threads_runs_its_command_in_a_new_interpreter(tmp_path):
    assert _children(tmp_path, "thread") == ["False 4 new interpreter", "True"]
