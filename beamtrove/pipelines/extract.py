"""``beamtrove run extract``: WARC pages to extracted text, with no filtering.

For users who filter elsewhere, and as the input of dedup and tokenization
runs. Writes ``<output>/documents/``, ``<output>/dead_letters/`` and
``stats.json``.
"""

from __future__ import annotations

from beamtrove.pipelines.common import ExtractionOptions, documents_sink, warc_reader
from beamtrove.pipelines.spec import PipelineSpec
from beamtrove.pipelines.steps import extraction

__all__ = ["SPEC"]

SPEC = PipelineSpec(
    name="extract",
    description="Extract the main text of the HTML pages in WARC files and write it as JSONL.",
    options=(ExtractionOptions,),
    reader=warc_reader,
    steps=(extraction,),
    sink=documents_sink,
    resumable=True,
    summary_stats=True,
)
