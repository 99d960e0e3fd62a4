"""Which duplicate is kept."""

from __future__ import annotations

import pytest

from beamtrove.document import Document
from beamtrove.transforms.dedup import KeepOrder


def _sorted_ids(order: KeepOrder, documents: list[Document]) -> list[str]:
    return [KeepOrder.document_id(node) for node in sorted(order.node(document) for document in documents)]


def test_without_keep_by_the_smallest_id_comes_first():
    documents = [Document("", "b"), Document("", "a"), Document("", "c")]
    assert _sorted_ids(KeepOrder(), documents) == ["a", "b", "c"]


def test_keep_by_orders_numbers_then_strings_then_missing_ties_by_id():
    documents = [
        Document("", "missing"),
        Document("", "late", metadata={"date": "2024-06-01"}),
        Document("", "early", metadata={"date": "2023-01-15"}),
        Document("", "numeric", metadata={"date": 20230101}),
        Document("", "b-tie", metadata={"date": "2023-01-15"}),
        Document("", "bool", metadata={"date": True}),
        Document("", "nan", metadata={"date": float("nan")}),
    ]
    expected = ["numeric", "b-tie", "early", "late", "bool", "missing", "nan"]
    assert _sorted_ids(KeepOrder("date"), documents) == expected


def test_a_leading_minus_prefers_the_largest_value():
    documents = [
        Document("", "low", metadata={"score": 0.2}),
        Document("", "high", metadata={"score": 0.9}),
        Document("", "abc", metadata={"score": "abc"}),
        Document("", "ab", metadata={"score": "ab"}),
        Document("", "b", metadata={"score": "b"}),
        Document("", "none"),
    ]
    assert _sorted_ids(KeepOrder("-score"), documents) == ["high", "low", "b", "abc", "ab", "none"]


@pytest.mark.parametrize("keep_by", ["", "-"])
def test_keep_by_must_name_a_field(keep_by):
    with pytest.raises(ValueError, match="keep_by must name a metadata field"):
        KeepOrder(keep_by)
