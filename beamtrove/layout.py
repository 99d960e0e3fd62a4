"""Where a run's results go: output folder and file names, and the output tags of steps.

Every module that writes or reads a run's output takes its names from here;
:class:`beamtrove.run_output.RunOutput` reads what it holds.
An output folder holds::

    documents/               the kept documents: part-NNNNN.jsonl.gz, or <stem>.jsonl.gz per input in
                             resumable runs
    excluded/<step>/         what a step dropped, each document with metadata.filter_reason
    clusters/<step>/         a dedup step's cluster map (removed id, kept id, cluster size)
    dead_letters/            records that could not be read or processed, with the reason
    stats.json               every step's counters, the run's options
    report.html              the run's report: funnel, summary-statistics histograms, dropped samples
    summary_stats/<group>/<stat>/metric.json
                             summary statistics of the kept documents (DataTrove's layout)
    _completed/<stem>.json   resumable runs: an input's completion marker, written after its outputs
    _resume.json             resumable runs: the configuration the output was started with
    .beamtrove-staging/      everything still in flight: a run's outputs until it succeeds, the outputs
                             of inputs still in progress; removed by the next run, or, for a run
                             stopped while publishing, moved into place by it or by the first command
                             that reads the folder (:func:`beamtrove.run_output.ready_to_read`)
    .beamtrove-lock/         the lock of the run that owns the folder while it runs
    .beamtrove-job/          a --staged run's job directory: its tasks and their files, until it is published

Names starting with ``.`` or ``_`` are never data: readers skip them
(:func:`beamtrove.fs.is_hidden`); an output folder read as input stands for the
documents its run kept, never for what it set aside (:data:`SET_ASIDE_NAMES`).
A run stages its outputs and moves them into the output folder only when it
succeeds (:mod:`beamtrove.execution.output`).

``<stem>`` is an input's path relative to its pattern, ``/`` replaced by
``--``, extensions dropped (:func:`input_stem`).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only a type here: beamtrove.fs takes the names of a run's outputs from this module.
    from beamtrove.fs import InputFile

__all__ = [
    "CLUSTERS",
    "CLUSTERS_DIR",
    "COMPLETED_DIR",
    "DEAD_LETTERS",
    "DEAD_LETTERS_DIR",
    "DOCUMENTS_DIR",
    "EXCLUDED",
    "EXCLUDED_DIR",
    "FILTER_REASON_KEY",
    "FORMER_JOB_DIR",
    "JOB_DIR",
    "KEPT",
    "LOCK_DIR",
    "PART_FILES",
    "PROCESS_INPUTS",
    "READ",
    "REPORT_FILE",
    "RESUME_CONFIG_FILE",
    "RUN_MARKS",
    "RUN_OUTPUT_NAMES",
    "SET_ASIDE_NAMES",
    "STAGING_DIR",
    "STATS_FILE",
    "SUMMARY_STATS_DIR",
    "TOKENS_AFTER_DEDUP",
    "TOKENS_BEFORE_DEDUP",
    "WRITE",
    "WRITER_TEMP_PREFIX",
    "WRITE_DEAD_LETTERS",
    "WRITE_DOCUMENTS",
    "completion_marker",
    "input_dead_letters",
    "input_documents",
    "input_excluded",
    "input_stem",
    "write_clusters",
    "write_excluded",
]

DOCUMENTS_DIR = "documents"
EXCLUDED_DIR = "excluded"
CLUSTERS_DIR = "clusters"
DEAD_LETTERS_DIR = "dead_letters"
STATS_FILE = "stats.json"
REPORT_FILE = "report.html"
SUMMARY_STATS_DIR = "summary_stats"
COMPLETED_DIR = "_completed"
RESUME_CONFIG_FILE = "_resume.json"
STAGING_DIR = ".beamtrove-staging"
LOCK_DIR = ".beamtrove-lock"
#: The job directory of a --staged run in its output folder: its tasks' files, kept until the run is published.
JOB_DIR = ".beamtrove-job"
#: Where beamtrove 0.15 and earlier kept a --staged run's job directory, in a layout no longer read: a run into the
#: folder removes it and starts over.
FORMER_JOB_DIR = ".beamtrove-staged"
WRITER_TEMP_PREFIX = ".beamtrove-tmp-"
#: What a run's output folder holds besides bookkeeping: a file name template never renders them from a value.
RUN_OUTPUT_NAMES = (
    DOCUMENTS_DIR,
    EXCLUDED_DIR,
    CLUSTERS_DIR,
    DEAD_LETTERS_DIR,
    STATS_FILE,
    REPORT_FILE,
    SUMMARY_STATS_DIR,
)
#: What a run's output folder holds besides the documents it kept: a folder read as input never yields them.
SET_ASIDE_NAMES = tuple(name for name in RUN_OUTPUT_NAMES if name != DOCUMENTS_DIR)
#: The files that make a folder the output folder of a beamtrove run.
RUN_MARKS = (STATS_FILE, RESUME_CONFIG_FILE)
#: The file names of documents, excluded documents and cluster maps written by a whole run.
PART_FILES = "part-${shard}.jsonl.gz"

#: The main output of a step: what it keeps.
KEPT = "kept"
#: The tagged output of documents a step dropped, with ``filter_reason`` in their metadata.
EXCLUDED = "excluded"
#: The metadata key of an excluded document that says why its step dropped it (DataTrove's name).
FILTER_REASON_KEY = "filter_reason"
#: The tagged output of records a step could not process (:class:`~beamtrove.dead_letter.DeadLetter`).
DEAD_LETTERS = "dead_letters"
#: The tagged output of a dedup step's cluster map (:class:`~beamtrove.transforms.dedup.ClusterMember`).
CLUSTERS = "clusters"

#: Stats names of the reader, of the writers of kept documents (``WRITE`` when they are not documents) and
#: of dead letters, and of a resumable run's processing of each input file. Every name users see in stats,
#: the report and ``inspect`` is snake_case; a step's name is also its folder under ``excluded/``.
READ = "read"
WRITE = "write"
WRITE_DOCUMENTS = "write_documents"
WRITE_DEAD_LETTERS = "write_dead_letters"
PROCESS_INPUTS = "process_inputs"
#: Stats names of the steps counting tokens before and after dedup (``dedup --count_tokens``); the share of
#: tokens kept is the dedup ratio.
TOKENS_BEFORE_DEDUP = "tokens_before_dedup"
TOKENS_AFTER_DEDUP = "tokens_after_dedup"

_COMPRESSION_SUFFIXES = (".gz", ".zst", ".bz2", ".xz")


def write_excluded(step: str) -> str:
    """Stats name of the writer of ``excluded/<step>/``."""
    return f"write_excluded_{step}"


def write_clusters(step: str) -> str:
    """Stats name of the writer of ``clusters/<step>/``."""
    return f"write_clusters_{step}"


def input_stem(file: InputFile) -> str:
    """The name an input's outputs and marker take: its relative path, ``/`` → ``--``, extension dropped."""
    name = file.name
    for suffix in _COMPRESSION_SUFFIXES:
        name = name.removesuffix(suffix)
    return posixpath.splitext(name)[0].replace("/", "--")


def input_documents(stem: str) -> str:
    """Where a resumable run puts one input's kept documents, relative to the output."""
    return f"{DOCUMENTS_DIR}/{stem}.jsonl.gz"


def input_excluded(step: str, stem: str) -> str:
    """Where a resumable run puts what ``step`` dropped of one input, relative to the output."""
    return f"{EXCLUDED_DIR}/{step}/{stem}.jsonl.gz"


def input_dead_letters(stem: str) -> str:
    """Where a resumable run puts one input's dead letters, relative to the output."""
    return f"{DEAD_LETTERS_DIR}/{stem}.jsonl"


def completion_marker(stem: str) -> str:
    """One input's completion marker, relative to the output."""
    return f"{COMPLETED_DIR}/{stem}.json"
