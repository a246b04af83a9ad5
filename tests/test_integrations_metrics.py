"""evidex.integrations.metrics: the audit and tier jobs as metrics in RAGAS's and DeepEval's
shape (a score, a reason, one verdict per claim or passage), fed either library's case."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from evidex.errors import InputError
from evidex.integrations.metrics import ContextRelevanceMetric, EvalCase, FaithfulnessMetric
from tests import audit_fixtures as af
from tests.integration_fixtures import QUERY, TEXTS, tier_judge
from tests.scripted import ScriptedJudge

CONTEXTS = [p.text for p in af.PASSAGES]


def _deepeval_case() -> Any:  # the fields of deepeval.test_case.LLMTestCase
    return SimpleNamespace(input=af.QUESTION, actual_output=af.ANSWER, retrieval_context=CONTEXTS)


def _ragas_sample() -> dict[str, Any]:  # the fields of ragas.SingleTurnSample
    return {"user_input": af.QUESTION, "response": af.ANSWER, "retrieved_contexts": CONTEXTS}


def _audit_judge() -> ScriptedJudge:
    return ScriptedJudge([af.reply(af.supported(), af.inferred(), af.contradicted())])


def test_both_libraries_cases_read_the_same() -> None:
    assert EvalCase.of(_deepeval_case()) == EvalCase.of(_ragas_sample())
    assert EvalCase.of(_ragas_sample()) == EvalCase(af.QUESTION, af.ANSWER, CONTEXTS)
    with pytest.raises(InputError, match="list of strings"):
        EvalCase.of({"input": "q", "retrieval_context": "one string"})


def test_faithfulness_is_the_share_of_fully_supported_claims() -> None:
    metric = FaithfulnessMetric(threshold=0.5, judge=_audit_judge(), store="sqlite://")
    score = metric.measure(_deepeval_case())

    assert score == metric.score == pytest.approx(1 / 3)
    assert metric.success is False and not metric.is_successful()
    assert [(v.item, v.verdict, v.counts) for v in metric.verdicts] == [
        (af.FOUNDED, "fully_supported", True),
        (af.CEO, "inferred", False),
        (af.FREE, "unsupported", False),
    ]
    assert metric.verdicts[2].reason == "The context gives a price of $500 per user per year."
    assert metric.reason is not None and metric.reason.startswith("1 of 3 claims fully supported")
    assert af.FREE in metric.reason and "decision: block" in metric.reason
    assert metric.last_result is not None and metric.last_result.decision.decision == "block"
    assert metric.__name__ == "evidex_faithfulness"


def test_faithfulness_through_the_ragas_call() -> None:
    metric = FaithfulnessMetric(judge=_audit_judge(), store="sqlite://")
    assert asyncio.run(metric.single_turn_ascore(_ragas_sample())) == pytest.approx(1 / 3)


def test_a_claim_that_fell_back_does_not_count_as_supported() -> None:
    metric = FaithfulnessMetric(judge=ScriptedJudge(["not json"] * 10), store="sqlite://")
    assert metric.measure(_ragas_sample()) == 0.0
    assert metric.verdicts and {v.source for v in metric.verdicts} == {"fallback"}


def test_context_relevance_counts_the_policy_tiers() -> None:
    case = {"input": QUERY, "retrieval_context": TEXTS}
    standard = ContextRelevanceMetric(judge=tier_judge(), store="sqlite://")
    assert standard.measure(case) == 0.75  # 3 of 4 in the top two tiers; one is irrelevant
    assert [v.verdict for v in standard.verdicts] == [
        "contextually-relevant",
        "directly-supporting",
        "irrelevant",
        "contextually-relevant",
    ]
    assert [v.item for v in standard.verdicts] == [f"passage-{i}" for i in range(1, 5)]
    assert standard.reason == (
        "3 of 4 passages in directly-supporting, contextually-relevant (policy standard)"
    )

    strict = ContextRelevanceMetric(policy="strict", threshold=0.5, judge=tier_judge())
    strict.store = "sqlite://"
    assert strict.single_turn_score(case) == 0.25 and strict.success is False


def test_a_metric_says_which_field_it_misses() -> None:
    with pytest.raises(InputError, match="needs the answer"):
        FaithfulnessMetric(judge=_audit_judge(), store="sqlite://").measure({"input": "q"})
    with pytest.raises(InputError, match="needs the question"):
        ContextRelevanceMetric(judge=tier_judge(), store="sqlite://").measure({"contexts": ["x"]})
