"""Child processes forked or started anew, in a process of their own: a test runner's threads would decide for it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

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


@pytest.mark.parametrize(("forget", "status"), [(False, -2), (True, 0)], ids=["remembered", "forgotten"])
def test_an_interrupt_handled_inside_code_run_from_a_string_ends_the_process_by_sigint_unless_forgotten(forget, status):
    # What an extension module's import does when a SIGTERM (as Ctrl-C) lands in it: CPython prints and handles
    # the interrupt, yet ends the process by SIGINT after its main module returned 0.
    script = textwrap.dedent(
        f"""
        import ctypes
        from beamtrove.processes import forget_interrupts_handled
        ctypes.pythonapi.PyRun_SimpleString(b"raise KeyboardInterrupt")
        if {forget}:
            forget_interrupts_handled()
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == status, result.stderr


def test_threads_that_fail_once_a_stop_signal_has_come_print_nothing():
    # Stopped, a run kills its workers, and its threads reading from them fail: each printed its traceback
    # around the one line that says the run was interrupted. A thread that fails before the signal still says so.
    script = textwrap.dedent(
        """
        import os, signal, threading
        from beamtrove.processes import stops_interrupt

        def fail(why):
            raise RuntimeError(why)

        def failed(why):
            failing = threading.Thread(target=fail, args=(why,))
            failing.start()
            failing.join()

        with stops_interrupt():
            failed("before the stop")
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                threading.Event().wait(60)
            except KeyboardInterrupt:
                failed("after the stop")
        failed("after the block")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("RuntimeError")] == [
        "RuntimeError: before the stop",
        "RuntimeError: after the block",
    ]
