"""The classify task step in isolation: prompt, schema and every validation rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evidex.tasks.base import ReplyInvalid
from evidex.tasks.classify import ClassifyBatch, ClassifyStep, ClassifyValue
from evidex.types import Passage, RiskLevel
from tests.classify_fixtures import (
    INPUT,
    PASSAGES,
    TAXONOMY,
    evidence,
    label,
    reply,
    unclassifiable,
)

STEP = ClassifyStep()


def batch(**overrides: Any) -> ClassifyBatch:
    values: dict[str, Any] = {"input": INPUT, "passages": tuple(PASSAGES), "taxonomy": TAXONOMY}
    values.update(overrides)
    return ClassifyBatch(**values)


def errors_of(data: Any, **overrides: Any) -> list[str]:
    with pytest.raises(ReplyInvalid) as info:
        STEP.validate(batch(**overrides), data)
    return list(info.value.errors)


def test_a_valid_reply_becomes_the_value() -> None:
    value = STEP.validate(batch(), reply(evidence_gaps=[" order date "]))
    assert isinstance(value, ClassifyValue)
    assert [a.label for a in value.classifications] == ["REFUND"]
    assert value.classifications[0].supporting_evidence[0].passage_id == "p1"
    assert value.evidence_gaps == ["order date"]
    assert value.source == "judge" and not value.unclassifiable


def test_quotes_are_checked_after_whitespace_normalisation() -> None:
    quote = "Refunds  are issued\nwhen an order"
    value = STEP.validate(batch(), reply(label(support=[evidence("p1", quote)])))
    assert value.classifications[0].supporting_evidence[0].quoted_text == quote


def test_unknown_label_names_the_taxonomy() -> None:
    (error,) = errors_of(reply(label("CANCEL")))
    assert "'CANCEL' is not in the taxonomy" in error
    assert "REFUND, SHIPPING, OTHER" in error


def test_quote_not_in_passage_shows_the_nearest_text() -> None:
    (error,) = errors_of(
        reply(label(support=[evidence("p1", "Refunds are paid if an order is late")]))
    )
    assert "is not verbatim in passage 'p1'" in error
    assert "it follows the text up to 'Refunds are'; then the quote has 'paid if" in error
    assert "(the text goes on 'issued when an order" in error


def test_quote_from_another_passage_names_the_right_one() -> None:
    (error,) = errors_of(reply(label(support=[evidence("p1", "Tracking numbers are emailed")])))
    assert "not in passage 'p1' but in passage 'p2'" in error


def test_unknown_passage_id() -> None:
    (error,) = errors_of(reply(label(support=[evidence("p9", "Refunds are issued")])))
    assert "passage_id 'p9' is not in the retrieved context" in error


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [
        (1.7, "confidence 1.7 is outside the range 0.0 to 1.0"),
        (-0.1, "confidence -0.1 is outside the range"),
        ("high", "confidence must be a number from 0.0 to 1.0, got 'high'"),
        (True, "confidence must be a number"),
        (None, "confidence must be a number"),
    ],
)
def test_confidence_must_be_a_number_in_range(confidence: Any, expected: str) -> None:
    (error,) = errors_of(reply(label(confidence=confidence)))
    assert expected in error


def test_every_label_needs_a_supporting_quote() -> None:
    (error,) = errors_of(reply(label(support=[])))
    assert "supporting_evidence is empty" in error


def test_missing_unclassifiable_reason() -> None:
    (error,) = errors_of(unclassifiable(reason=None))
    assert '"unclassifiable_reason" is missing' in error
    (error,) = errors_of(unclassifiable(reason="  "))
    assert '"unclassifiable_reason" is missing' in error


def test_a_label_cannot_be_assigned_when_unclassifiable() -> None:
    (error,) = errors_of(reply(unclassifiable=True, unclassifiable_reason="unsure"))
    assert "labels are assigned while unclassifiable is true" in error


def test_an_empty_answer_must_be_declared_unclassifiable() -> None:
    (error,) = errors_of(reply(classifications=[]))
    assert "no label is assigned and unclassifiable is false" in error


def test_unclassifiable_with_a_reason_is_valid() -> None:
    value = STEP.validate(batch(), unclassifiable())
    assert value.unclassifiable and value.unclassifiable_reason and not value.classifications


def test_single_label_mode_allows_one_label() -> None:
    shipping = label("SHIPPING", support=[evidence("p2", "Tracking numbers are emailed")])
    (error,) = errors_of(reply(label(), shipping))
    assert "single-label mode allows at most one label, but 2 were assigned" in error
    value = STEP.validate(batch(multi_label=True), reply(label(), shipping))
    assert [a.label for a in value.classifications] == ["REFUND", "SHIPPING"]


def test_a_label_assigned_twice_is_rejected() -> None:
    errors = errors_of(reply(label(), label()), multi_label=True)
    assert any("'REFUND' is assigned more than once" in e for e in errors)


def test_counter_evidence_is_validated_too() -> None:
    (error,) = errors_of(reply(label(counter=[evidence("p3", "Gift cards can be swapped")])))
    assert "counter_evidence[0]" in error and "not verbatim in passage 'p3'" in error


def test_every_error_is_reported_at_once() -> None:
    data = reply(
        label("CANCEL", confidence="high", support=[evidence("p1", "not there")]),
        evidence_gaps="none",
    )
    errors = errors_of(data)
    assert len(errors) == 4
    text = "\n".join(errors)
    for part in ("'CANCEL'", "'high'", "not verbatim", "evidence_gaps"):
        assert part in text


@pytest.mark.parametrize(
    "data",
    [[], "REFUND", {"classifications": "REFUND", "unclassifiable": False}],
)
def test_malformed_shapes_are_rejected_with_words(data: Any) -> None:
    assert errors_of(data)


def test_fallback_is_explicit() -> None:
    value = STEP.fallback(batch(), "reply failed validation: x")
    assert value.unclassifiable and value.source == "fallback"
    assert value.reason == "reply failed validation: x"
    assert "reply failed validation: x" in (value.unclassifiable_reason or "")
    assert not value.classifications


def test_request_fills_every_placeholder_and_keeps_data_apart() -> None:
    request = STEP.request(
        batch(constraints=("Never use OTHER for payment questions.",), risk=RiskLevel.HIGH)
    )
    system, user = (m.content for m in request.messages)
    assert "[" + "LABELS]" not in system and "- REFUND: The customer asks" in system
    assert "Never use OTHER for payment questions." in system
    assert "Risk level: high" in system and "Single-label mode" in system
    assert "below 0.7 go to a human reviewer" in system
    assert user.startswith("## INPUT\n" + INPUT)
    context = json.loads(user.split("text:\n", 1)[1])
    assert [p["passage_id"] for p in context] == ["p1", "p2", "p3"]
    assert [vars(p) for p in request.payload.passages] == context
    assert STEP.template.placeholders() == {"LABELS", "CONSTRAINTS", "EXAMPLES", "INPUT", "CONTEXT"}


def test_schema_enumerates_labels_and_ids_and_limits_single_label() -> None:
    schema = STEP.request(batch()).schema
    item = schema["properties"]["classifications"]
    assert item["maxItems"] == 1
    assert item["items"]["properties"]["label"]["enum"] == ["REFUND", "SHIPPING", "OTHER"]
    quote = item["items"]["properties"]["supporting_evidence"]["items"]
    assert quote["properties"]["passage_id"]["enum"] == ["p1", "p2", "p3"]
    multi = STEP.request(batch(multi_label=True)).schema["properties"]["classifications"]
    assert "maxItems" not in multi


def test_cache_material_changes_with_every_option() -> None:
    base = STEP.cache_material(batch())
    for change in (
        {"threshold": 0.5},
        {"risk": RiskLevel.HIGH},
        {"multi_label": True},
        {"constraints": ("x",)},
        {"passages": (Passage(passage_id="p1", text="other"),)},
    ):
        assert STEP.cache_material(batch(**change)) != base
