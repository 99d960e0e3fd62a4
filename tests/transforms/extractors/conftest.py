"""Real article pages of the article-extraction-benchmark, for the extractor tests."""

from __future__ import annotations

import gzip
import json

import pytest

from beamtrove.document import Document
from tests.conftest import require

# Page-id prefix -> (a sentence of the gold article, boilerplate of the same page that is not in the
# gold text); each pair was read by hand in the page and in its gold text.
PAGES = {
    "06e5123e4ef7": ("A spokesperson for the NYAG declined to comment.", "Got a news tip?"),
    "16c30add7e96": (
        "The government distributed 5 million face masks to schoolchildren.",
        "By choosing I Accept, you consent to our use of cookies",
    ),
    "0ec95c7261d1": ("엘제이의 리벤지인가, 류화영의 피해자 코스프레인가.", "광고제휴문의"),
    "232a43fb15ab": ("It is unclear if the 13-inch MacBook Pro will follow suit.", "Got a tip for us?"),
}


@pytest.fixture(scope="session")
def benchmark(data_dir) -> dict[str, dict]:
    """Each page's ``html`` (decoded), gold ``articleBody`` and ``url``, by page id."""
    root = require(data_dir / "article-extraction-benchmark")
    pages = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    for key, page in pages.items():
        page["html"] = gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes()).decode("utf-8", "replace")
    return pages


def page_id(benchmark: dict[str, dict], prefix: str) -> str:
    (key,) = [key for key in benchmark if key.startswith(prefix)]
    return key


def page_documents(benchmark: dict[str, dict]) -> list[Document]:
    """The pages of ``PAGES`` as documents, with their prefix as id."""
    return [
        Document(
            text=benchmark[page_id(benchmark, prefix)]["html"],
            id=prefix,
            metadata={"url": benchmark[page_id(benchmark, prefix)]["url"]},
        )
        for prefix in sorted(PAGES)
    ]
