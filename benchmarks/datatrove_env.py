"""A virtualenv holding DataTrove 0.10.1, kept apart from beamtrove's environment.

The comparison scripts in this folder run DataTrove there, in a subprocess.
The install follows what works offline on a machine that only reaches package
registries: DataTrove's ``processing`` extra plus the modules its readers and
filters import, trafilatura 2.x over the 1.11 the extra pins (so both tools
extract with the same trafilatura), and ``fasttext-numpy2`` reinstalled last
because another wheel the extra pulls in ships a ``fasttext`` module that
breaks under numpy 2.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

DEFAULT_VENV = pathlib.Path.home() / ".cache" / "beamtrove" / "datatrove-0.10.1-venv"

_STEPS = (
    [
        "datatrove[processing]==0.10.1",
        "orjson",
        "warcio",
        "faust-cchardet",
        "python-magic",
        "spacy",
        "lxml_html_clean",
        "tokenizers",
        "fasttext-numpy2",
        # The Hugging Face reader (readers_parity).
        "datasets",
        "pyarrow",
    ],
    ["trafilatura==2.3.1", "lxml_html_clean"],
    ["--force-reinstall", "--no-deps", "fasttext-numpy2==0.10.4"],
)


def datatrove_python(venv: pathlib.Path = DEFAULT_VENV) -> pathlib.Path:
    """The venv's python, creating the venv and installing DataTrove on first use."""
    python = venv / "bin" / "python"
    ready = venv / ".beamtrove-datatrove-ready"
    if ready.exists():
        return python
    print(f"installing DataTrove 0.10.1 into {venv} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    for packages in _STEPS:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *packages], check=True)
    ready.touch()
    return python
