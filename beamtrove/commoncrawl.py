"""Common Crawl by dump name: the files of a dump, as its paths file lists them.

Common Crawl publishes, for each dump, ``crawl-data/<dump>/warc.paths.gz``
(and ``wet.paths.gz``, ``wat.paths.gz``): one path per line, relative to
where Common Crawl is served (``https://data.commoncrawl.org``, or
``s3://commoncrawl`` with AWS credentials). Reading the dump from that file
needs no listing, which HTTPS does not offer and S3 gives only slowly (about
90,000 objects per dump). :class:`DumpFiles` names the files a run reads: the
whole dump, a range of the paths file's lines (to split a dump across
launches) and a seeded sample of them (to try it cheaply); readers take it
as an input, and read the paths file when they are built and again when the
run starts, so a pipeline graph or a template holds the selection, not
90,000 names.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from beamtrove.fs import InputFile, join, open_resuming

__all__ = ["CC_BASE", "KINDS", "DumpFiles", "check_dump_name", "parse_line_range"]

#: Where Common Crawl is served to everyone, without credentials.
CC_BASE = "https://data.commoncrawl.org"
#: The kinds of files a dump has a paths file for.
KINDS = ("warc", "wet", "wat")
# A dump's name is one folder name (CC-MAIN-2024-22): it names a folder under the run's output too.
_DUMP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_LINE_RANGE = re.compile(r"(\d*):(\d*)")


def check_dump_name(dump: str) -> None:
    """Refuses a dump name that is not one folder name: it names a folder under the run's output.

    Raises:
        ValueError: It is not.
    """
    if not _DUMP_NAME.fullmatch(dump):
        raise ValueError(
            f"--dump {dump!r} must be one folder name such as CC-MAIN-2024-22: letters, digits, '.', '_' and '-', "
            "starting with a letter or digit."
        )


def parse_line_range(text: str) -> tuple[int, int | None]:
    """``START:END`` (0-based lines, ``END`` excluded, either left out) as ``(start, end)``.

    Raises:
        ValueError: ``text`` is no such range, or it is empty.
    """
    match = _LINE_RANGE.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"{text!r} is not a range of lines: write START:END, e.g. 0:1000 or 5000: (0-based, END left out)."
        )
    start, end = int(match[1] or 0), (int(match[2]) if match[2] else None)
    if end is not None and end <= start:
        raise ValueError(f"The range of lines {text!r} is empty: END must be past START.")
    return start, end


@dataclasses.dataclass(frozen=True)
class DumpFiles:
    """The files of a Common Crawl dump a run reads, as the dump's paths file lists them.

    The selection is the same wherever it is made: a range of the paths
    file's lines, then, with ``count``, the ``count`` lines of that range
    whose hash with ``seed`` is smallest, in the paths file's order (so a
    larger count reads the same files and more).

    Attributes:
        dump: The dump's name, such as ``CC-MAIN-2024-22``.
        base: Where Common Crawl is served: the default HTTPS server,
            ``s3://commoncrawl``, or any URL or folder laid out like it.
        kind: ``warc``, ``wet`` or ``wat``.
        start: The first line of the paths file read (0-based).
        end: The line the range stops before; None for the end of the file.
        count: How many files of the range to read; None for all of them.
        seed: What the sample of ``count`` files is drawn with.
    """

    dump: str
    base: str = CC_BASE
    kind: str = "warc"
    start: int = 0
    end: int | None = None
    count: int | None = None
    seed: int = 0

    def __post_init__(self):
        check_dump_name(self.dump)
        if self.kind not in KINDS:
            raise ValueError(f"A dump's files are one of {', '.join(KINDS)}, not {self.kind!r}.")
        if self.start < 0 or (self.end is not None and self.end <= self.start):
            raise ValueError(f"Lines [{self.start}, {self.end}) of a paths file are no range of lines.")
        if self.count is not None and self.count < 1:
            raise ValueError(f"--cc_files must be at least 1 (got {self.count}).")

    @property
    def paths_url(self) -> str:
        """The dump's paths file."""
        return join(self.base, "crawl-data", self.dump, f"{self.kind}.paths.gz")

    def __str__(self) -> str:
        lines = "" if (self.start, self.end) == (0, None) else f" lines {self.start}:{self.end or ''}"
        sample = "" if self.count is None else f", {self.count} files sampled with seed {self.seed}"
        return f"{self.paths_url}{lines}{sample}"

    def select(self, paths: list[str]) -> list[str]:
        """The paths of ``paths`` (a paths file's lines, in order) this selection reads.

        Raises:
            ValueError: The range starts past the paths file's end.
        """
        if self.start >= len(paths):
            raise ValueError(
                f"{self.paths_url} lists {len(paths):,} files: the range of lines {self.start}:{self.end or ''} "
                "starts past its end."
            )
        chosen = paths[self.start : self.end]
        if self.count is None or self.count >= len(chosen):
            return chosen
        ranked = sorted(chosen, key=lambda path: hashlib.sha256(f"{self.seed}\0{path}".encode()).digest())
        sampled = set(ranked[: self.count])
        return [path for path in chosen if path in sampled]

    def list_files(self, storage_options: Mapping[str, Any] | None = None) -> list[InputFile]:
        """The selected files, named by their path in the paths file; their sizes are not asked for (0).

        The paths file is read through transient faults
        (:func:`~beamtrove.fs.open_resuming`).

        Raises:
            FileNotFoundError: The dump has no such paths file under ``base``.
            ValueError: The range starts past the paths file's end.
        """
        try:
            # Read when a run is built and when it starts: nothing answering there is a wrong --cc_base.
            paths_file = open_resuming(self.paths_url, storage_options, wait_out_refusals=False)
            with paths_file as stored, gzip.open(stored, "rt") as lines:
                paths = [line.strip() for line in lines if line.strip()]
        except FileNotFoundError:
            raise FileNotFoundError(
                f"Common Crawl has no dump {self.dump} under {self.base}: {self.paths_url} is not found. Check --dump "
                "(dump names are listed at https://data.commoncrawl.org/crawl-data/index.html) and --cc_base."
            ) from None
        except ImportError:  # the store's file system is not installed: its message says what to install
            raise
        except Exception as failure:  # no connection, no credentials, a damaged file: one line, not a traceback
            raise OSError(
                f"Cannot read {self.paths_url}, the list of {self.dump}'s files: {type(failure).__name__}: "
                f"{' '.join(str(failure).split())}. Check --cc_base, the network and the credentials it needs."
            ) from None
        return [InputFile(join(self.base, path), path, 0) for path in self.select(paths)]
