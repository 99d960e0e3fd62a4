"""The extraction sandbox: time limit, crashed processes and failures, on real pages."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline  # so pytest collects no class
from apache_beam.testing.util import assert_that, equal_to

from beamtrove.document import Document
from beamtrove.transforms.extractors import Extract, Extractor, Trafilatura
from tests.conftest import run_and_collect
from tests.transforms.extractors.conftest import PAGES, page_documents

HANG_MARKER = "NYAG declined to comment"  # sentences of two real pages of conftest.PAGES
CRASH_MARKER = "face masks to schoolchildren"


class _Pathological(Trafilatura):
    """Trafilatura, except that it computes forever on one real page and kills its own process on another.

    Real pages that take trafilatura minutes or kill it are rare and machine-dependent; this
    makes the two behaviours the sandbox guards against happen on known pages.
    """

    def extract(self, html: str) -> str:
        while HANG_MARKER in html:
            pass
        if CRASH_MARKER in html:
            os._exit(3)
        return super().extract(html)


class _Failing(Extractor):
    name = "failing"

    def extract(self, html: str) -> str:
        raise ValueError("no main text here")


def test_a_hung_page_times_out_and_a_dead_process_is_replaced(benchmark):
    documents = page_documents(benchmark)
    started = time.monotonic()

    def build(pipeline):
        texts, dead_letters = (
            pipeline | beam.Create(documents) | "extract" >> Extract(_Pathological(), timeout=2.0).with_dead_letters()
        )
        assert_that(
            texts | beam.Map(lambda d: d.id),
            equal_to([d.id for d in documents if not any(m in d.text for m in (HANG_MARKER, CRASH_MARKER))]),
        )
        assert_that(
            dead_letters | "Reasons" >> beam.Map(lambda d: (d.reason, d.url)),
            equal_to(
                [
                    ("timeout", next(d.metadata["url"] for d in documents if HANG_MARKER in d.text)),
                    ("process_died", next(d.metadata["url"] for d in documents if CRASH_MARKER in d.text)),
                ]
            ),
            label="DeadLetters",
        )

    counters = run_and_collect(build)["extract"]["counters"]
    # The endless page cost its CPU-time limit, not forever.
    assert time.monotonic() - started < 120
    assert counters == {"in": len(PAGES), "out": len(PAGES) - 2, "errors.timeout": 1, "errors.process_died": 1}


class _AbortsOnFirstStart(Trafilatura):
    """Trafilatura whose first extraction process aborts while starting, as a fork amid gRPC threads can."""

    def __init__(self, first_start_marker: str):
        super().__init__()
        self.first_start_marker = first_start_marker

    def setup(self) -> None:
        if not os.path.exists(self.first_start_marker):
            open(self.first_start_marker, "w").close()
            os.abort()
        super().setup()


def test_an_extraction_process_that_dies_while_starting_is_started_again(benchmark, tmp_path):
    documents = page_documents(benchmark)

    def build(pipeline):
        extractor = _AbortsOnFirstStart(str(tmp_path / "started-once"))
        texts = pipeline | beam.Create(documents) | "extract" >> Extract(extractor, timeout=30.0)
        assert_that(texts | beam.Map(lambda d: d.id), equal_to([d.id for d in documents]))

    counters = run_and_collect(build)["extract"]["counters"]
    assert (tmp_path / "started-once").exists()
    assert counters == {"in": len(PAGES), "out": len(PAGES)}


def test_extractor_exceptions_are_dead_letters_in_process(benchmark):
    documents = page_documents(benchmark)
    pipeline = BeamTestPipeline()
    texts, dead_letters = (
        pipeline | beam.Create(documents) | Extract(_Failing(), timeout=None, step="failing").with_dead_letters()
    )
    assert_that(texts, equal_to([]))
    assert_that(
        dead_letters
        | beam.Map(
            lambda d: (d.step, d.reason, d.message.split(" (at ")[0], d.message.endswith(" in extract)"), d.record_id)
        ),
        equal_to([("failing", "failed", "ValueError: no main text here", True, d.id) for d in documents]),
        label="DeadLetters",
    )
    pipeline.run().wait_until_finish()


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_timeout_must_be_positive(timeout):
    # NaN compares false with every CPU time: every page would be a timeout.
    with pytest.raises(ValueError, match=f"timeout must be positive, finite seconds or None, not {timeout!r}"):
        Extract(Trafilatura(), timeout=timeout)


def test_document_fields_other_than_text_are_kept(benchmark):
    (document,) = page_documents(benchmark)[:1]
    document = Document(text=document.text, id="kept-id", metadata={"url": "u", "dump": "CC-MAIN-2024-22"})
    pipeline = BeamTestPipeline()
    out = pipeline | beam.Create([document]) | Extract(Trafilatura(), timeout=None)
    assert_that(out | beam.Map(lambda d: (d.id, d.metadata)), equal_to([("kept-id", document.metadata)]))
    pipeline.run().wait_until_finish()


def test_an_unguarded_pipeline_script_is_not_rerun_by_the_extraction_process(data_dir, tmp_path):
    # Beam scripts often build their pipeline at top level; an extraction process that re-imported
    # the script would run the pipeline again inside itself.
    warc = data_dir / "warc" / "cc-main-2020-34_resiliparse_warcfile.warc.gz"
    script = tmp_path / "job.py"
    script.write_text(
        "import apache_beam as beam\n"
        "from beamtrove.transforms.extractors import Extract, Trafilatura\n"
        "from beamtrove.transforms.readers import ReadWarc\n"
        "from beamtrove.transforms.writers import WriteJsonl\n"
        "print('pipeline script started', flush=True)\n"
        "with beam.Pipeline() as p:\n"
        f"    p | ReadWarc({str(warc)!r}) | Extract(Trafilatura(), timeout=10.0) | WriteJsonl({str(tmp_path)!r})\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("pipeline script started") == 1
    assert list(tmp_path.glob("part-*.jsonl.gz"))
