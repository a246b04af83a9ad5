"""Classify in scoring mode: quotes picked by code, labels from injected Yes probabilities.

Contracts: every reply passes the classify task's own validation (verbatim quotes from the
passage they name, labels of the taxonomy, the unclassifiable rules, the label mode), whatever
the probabilities; the label is the most probable one at or above the cut point, else the input
is unclassifiable; every rationale names the heuristic. The encoder is a bag-of-words embedding
and the model fixed probabilities, so these tests need no model file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

import evidex
from evidex.judges._claim_evidence import Evidence
from evidex.judges._qwen_classify import ClassifyCuts, ClassifyScorer, label_prompt, model_yes
from evidex.judging import ClassifyPayload, Judge, JudgeReply, JudgeRequest, Message
from evidex.tasks.classify import ClassifyBatch, ClassifyStep, ClassifyValue
from evidex.taxonomy import LabelDefinition
from evidex.types import Passage
from tests.classify_fixtures import INPUT, PASSAGES, TAXONOMY
from tests.test_qwen_audit import bag_embed

STEP = ClassifyStep()


def fixed(probs: Mapping[str, float]) -> Any:
    """A ``yes`` function answering each label with a fixed P(Yes); records what it saw."""
    seen: list[tuple[str, list[Evidence], str]] = []

    def yes(text: str, evidence: Sequence[Evidence], label: LabelDefinition) -> float:
        seen.append((text, list(evidence), label.name))
        return probs[label.name]

    yes.seen = seen  # type: ignore[attr-defined]
    return yes


def run(probs: Mapping[str, float], **overrides: Any) -> tuple[dict[str, Any], ClassifyValue]:
    """The scorer's reply to the task's own request, and the task's validation of it."""
    values: dict[str, Any] = {"input": INPUT, "passages": tuple(PASSAGES), "taxonomy": TAXONOMY}
    values.update(overrides)
    batch = ClassifyBatch(**values)
    payload = STEP.request(batch).payload
    assert isinstance(payload, ClassifyPayload)
    scorer = ClassifyScorer(fixed(probs), bag_embed, name="test-model")
    data = json.loads(scorer.reply_text(payload))
    return data, STEP.validate(batch, data)


def test_a_clear_label_is_the_most_probable_and_passes_validation() -> None:
    _, value = run({"REFUND": 0.9, "SHIPPING": 0.4, "OTHER": 0.1})
    assert [a.label for a in value.classifications] == ["REFUND"]
    assert not value.unclassifiable
    (assignment,) = value.classifications
    assert abs(assignment.confidence - 0.9 / 1.4) < 1e-3  # its share of the labels' P(Yes)
    texts = {p.passage_id: p.text for p in PASSAGES}
    for quote in assignment.supporting_evidence:
        assert quote.quoted_text in texts[quote.passage_id]
        assert quote.rationale.startswith("heuristic")
    assert assignment.counter_evidence == []


def test_a_close_runner_up_is_shown_as_counter_evidence() -> None:
    _, value = run({"REFUND": 0.8, "SHIPPING": 0.75, "OTHER": 0.1})
    (assignment,) = value.classifications
    (counter,) = assignment.counter_evidence
    assert "SHIPPING" in counter.rationale and counter.rationale.startswith("heuristic")


def test_no_label_at_the_cut_point_is_unclassifiable_and_passes_validation() -> None:
    _, value = run({"REFUND": 0.3, "SHIPPING": 0.2, "OTHER": 0.45})
    assert value.unclassifiable and value.classifications == []
    assert value.unclassifiable_reason and value.unclassifiable_reason.startswith("heuristic")
    assert value.evidence_gaps


def test_multi_label_assigns_every_label_at_the_cut_point() -> None:
    _, value = run({"REFUND": 0.9, "SHIPPING": 0.7, "OTHER": 0.1}, multi_label=True)
    assert {a.label: a.confidence for a in value.classifications} == {
        "REFUND": 0.9,
        "SHIPPING": 0.7,
    }


def test_single_label_mode_keeps_one_label_when_several_pass() -> None:
    _, value = run({"REFUND": 0.9, "SHIPPING": 0.7, "OTHER": 0.6})
    assert [a.label for a in value.classifications] == ["REFUND"]


def test_every_label_is_asked_once_about_the_same_evidence() -> None:
    yes = fixed({"REFUND": 0.9, "SHIPPING": 0.1, "OTHER": 0.1})
    payload = STEP.request(
        ClassifyBatch(input=INPUT, passages=tuple(PASSAGES), taxonomy=TAXONOMY)
    ).payload
    assert isinstance(payload, ClassifyPayload)
    ClassifyScorer(yes, bag_embed, name="t").reply(payload)
    assert [name for _, _, name in yes.seen] == TAXONOMY.names
    assert all(evidence == yes.seen[0][1] for _, evidence, _ in yes.seen)


def test_empty_context_is_unclassifiable_without_a_model_call() -> None:
    def never(*_: Any) -> float:
        raise AssertionError("no call without evidence")

    payload = ClassifyPayload(input=INPUT, passages=(), labels=tuple(TAXONOMY.labels))
    data = ClassifyScorer(never, bag_embed, name="t").reply(payload)
    batch = ClassifyBatch(input=INPUT, passages=(), taxonomy=TAXONOMY)
    assert STEP.validate(batch, data).unclassifiable


def test_a_far_best_sentence_is_reported_as_an_evidence_gap() -> None:
    far = (Passage(passage_id="x", text="Bananas are yellow."),)
    _, value = run({"REFUND": 0.9, "SHIPPING": 0.1, "OTHER": 0.1}, passages=far)
    assert any("cosine" in g for g in value.evidence_gaps)


def test_the_cut_point_decides() -> None:
    payload = STEP.request(
        ClassifyBatch(input=INPUT, passages=tuple(PASSAGES), taxonomy=TAXONOMY)
    ).payload
    assert isinstance(payload, ClassifyPayload)
    yes = fixed({"REFUND": 0.6, "SHIPPING": 0.1, "OTHER": 0.1})
    low = ClassifyScorer(yes, bag_embed, cuts=ClassifyCuts(assign=0.5), name="t").reply(payload)
    high = ClassifyScorer(yes, bag_embed, cuts=ClassifyCuts(assign=0.7), name="t").reply(payload)
    assert not low["unclassifiable"] and high["unclassifiable"]


def test_model_yes_asks_yes_or_no_with_the_label_last() -> None:
    asked: list[tuple[list[Message], list[str]]] = []

    def probabilities(messages: Sequence[Message], candidates: Sequence[str]) -> dict[str, float]:
        asked.append((list(messages), list(candidates)))
        return {"Yes": 0.7, "No": 0.3}

    (label,) = [lb for lb in TAXONOMY.labels if lb.name == "REFUND"]
    evidence = [Evidence("p1", PASSAGES[0].text, 0, len(PASSAGES[0].text), 0.5)]
    assert model_yes(probabilities)(INPUT, evidence, label) == 0.7
    (messages, candidates) = asked[0]
    assert candidates == ["Yes", "No"]
    user = messages[-1].content
    assert user.endswith("fits the input?") and label.description in user
    other = label_prompt(INPUT, evidence, TAXONOMY.labels[1])[-1].content
    shared = user[: user.index("Label ")]
    assert other.startswith(shared)  # the labels' prompts share everything before the label


class ScoringClassifyJudge(Judge):
    """A test double: the classify scorer with fixed P(Yes) per label, behind the job."""

    jobs: ClassVar[frozenset[str]] = frozenset({"classify"})

    def __init__(self, probs: Mapping[str, float]) -> None:
        super().__init__("test:scoring-classify")
        self.scorer = ClassifyScorer(fixed(probs), bag_embed, name="test-model")

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        assert isinstance(request.payload, ClassifyPayload)
        return JudgeReply(text=self.scorer.reply_text(request.payload))


@pytest.mark.parametrize(
    ("probs", "labels"),
    [({"REFUND": 0.9, "SHIPPING": 0.3, "OTHER": 0.1}, ["REFUND"]), ({"REFUND": 0.2}, [])],
)
def test_the_job_takes_the_reply_without_a_re_ask(
    store: Any, probs: dict[str, float], labels: list[str]
) -> None:
    probs = {"SHIPPING": 0.1, "OTHER": 0.1, **probs}
    result = evidex.classify(
        INPUT, PASSAGES, TAXONOMY, judge=ScoringClassifyJudge(probs), store=store
    )
    assert result.source == "judge" and result.judge_calls == 1
    assert [a.label for a in result.classifications] == labels
    assert result.unclassifiable == (not labels)


@pytest.mark.slow
def test_real_score_mode_classify_passes_validation(qwen: Any, store: Any) -> None:
    from evidex.judges._qwen import QwenJudge, QwenOptions

    judge = QwenJudge(options=QwenOptions(mode="score", n_ctx=qwen.options.n_ctx))
    result = evidex.classify(INPUT, PASSAGES, TAXONOMY, judge=judge, store=store)
    assert result.source == "judge" and result.judge_calls == 1, "no re-ask, no fallback"
    for a in result.classifications:
        assert all(e.rationale.startswith("heuristic") for e in a.supporting_evidence)
    assert result.classifications or (result.unclassifiable_reason or "").startswith("heuristic")
    assert result.usage.prompt_tokens > 0, "the prompt tokens of the questions asked are counted"
