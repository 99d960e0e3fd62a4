"""The pager long listings go through on a terminal: ``$PAGER``, else ``less``."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import TextIO

__all__ = ["paged_output"]

# less: quit when everything fits one screen, keep colours, leave the text on the screen (git sets the same).
_LESS_DEFAULTS = "FRX"


@contextlib.contextmanager
def paged_output(terminal: bool) -> Iterator[TextIO]:
    """Where the lines go: the pager when on a terminal and one is set or found, else stdout.

    Quitting the pager, or closing the pipe stdout goes to, ends the reading quietly.
    """
    pager = os.environ.get("PAGER", "less" if shutil.which("less") else "") if terminal else ""
    if not pager.strip():
        try:
            yield sys.stdout
            sys.stdout.flush()
        except BrokenPipeError:
            # Python would report the pipe again when it flushes stdout at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    environment = {**os.environ, "LESS": os.environ.get("LESS", _LESS_DEFAULTS)}
    process = subprocess.Popen(
        pager, shell=True, stdin=subprocess.PIPE, env=environment, text=True, encoding="utf-8", errors="replace"
    )
    try:
        yield process.stdin
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # the pager was quit, or Ctrl-C stopped the reading: the pager keeps what it was given
    finally:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
        while process.poll() is None:
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C in less is less's own
                process.wait()
