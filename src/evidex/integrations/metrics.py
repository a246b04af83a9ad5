"""The audit and tier jobs as evaluation metrics, in the shape RAGAS and DeepEval users know.

A metric here is a score plus the reasons behind it, one per claim or per passage, read from an
evaluation case as either library spells it: DeepEval's ``LLMTestCase`` (``input``,
``actual_output``, ``retrieval_context``) or RAGAS's ``SingleTurnSample`` (``user_input``,
``response``, ``retrieved_contexts``), or a plain mapping with those keys. Each metric has
DeepEval's calls (``measure`` / ``a_measure`` set ``score``, ``reason``, ``success``;
``is_successful()``) and RAGAS's (``single_turn_score`` / ``single_turn_ascore`` return the
score). Neither library is needed; neither is imported.

How they map (documented in ``docs/integrations.md``):

===============================  =====================================  =====================
evidex                           score                                  RAGAS / DeepEval
===============================  =====================================  =====================
:class:`FaithfulnessMetric`      claims graded ``fully_supported`` /    ``faithfulness`` /
(the audit job)                  all claims (1.0 when there are none)   ``FaithfulnessMetric``
:class:`ContextRelevanceMetric`  passages in the policy's tiers /       ``context_precision``
(the tier job)                   all passages                           (unweighted) /
                                                                        ``ContextualRelevancy``
===============================  =====================================  =====================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evidex.errors import InputError
from evidex.jobs import run_sync
from evidex.jobs.audit import AuditResult, aaudit
from evidex.jobs.select import policy_tiers
from evidex.jobs.tier import TierResult, atier

__all__ = ["ContextRelevanceMetric", "EvalCase", "FaithfulnessMetric", "Verdict"]


@dataclass(frozen=True)
class EvalCase:
    """An evaluation case, whichever library named its fields."""

    question: str | None
    answer: str | None
    contexts: list[str]

    @classmethod
    def of(cls, case: Any) -> EvalCase:
        """Read a DeepEval test case, a RAGAS sample or a mapping with either's keys."""

        def get(*names: str) -> Any:
            for name in names:
                value = case.get(name) if isinstance(case, Mapping) else getattr(case, name, None)
                if value is not None:
                    return value
            return None

        contexts = get("retrieval_context", "retrieved_contexts", "context", "contexts") or []
        if isinstance(contexts, str) or not isinstance(contexts, Sequence):
            raise InputError("the case's retrieved contexts must be a list of strings")
        return cls(get("input", "user_input"), get("actual_output", "response"), list(contexts))


@dataclass(frozen=True)
class Verdict:
    """The grade of one claim or one passage, and why."""

    item: str
    """The claim's text, or the passage's id (``passage-N``: the N-th context)."""
    verdict: str
    """A claim's support level, or a passage's tier."""
    counts: bool
    """Whether it counts toward the score (supported claim, passage in the policy's tiers)."""
    reason: str
    source: str
    """Where the grade came from: judge, cache or fallback."""


@dataclass
class _Metric:
    """What both metrics share: DeepEval's and RAGAS's calls around one evidex job."""

    threshold: float = 0.5
    judge: Any = None
    store: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    score: float | None = field(default=None, init=False)
    reason: str | None = field(default=None, init=False)
    success: bool | None = field(default=None, init=False)
    verdicts: list[Verdict] = field(default_factory=list, init=False)
    name = "evidex"

    @property
    def __name__(self) -> str:  # DeepEval reports a metric by this name
        return self.name

    def _options(self) -> dict[str, Any]:
        return {"judge": self.judge, "store": self.store, **self.options}

    async def _grade(self, case: EvalCase) -> tuple[float, list[Verdict], str]:
        raise NotImplementedError

    async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        """Grade the case: set ``score``, ``reason``, ``verdicts``, ``success``; return score."""
        score, verdicts, reason = await self._grade(EvalCase.of(test_case))
        self.score, self.verdicts, self.reason = score, verdicts, reason
        self.success = score >= self.threshold
        return score

    def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        """:meth:`a_measure` from sync code."""
        return run_sync(self.a_measure(test_case))

    def is_successful(self) -> bool:
        return bool(self.success)

    async def single_turn_ascore(self, sample: Any, callbacks: Any = None) -> float:
        """RAGAS's call: the score of one sample."""
        return await self.a_measure(sample)

    def single_turn_score(self, sample: Any, callbacks: Any = None) -> float:
        return self.measure(sample)


@dataclass
class FaithfulnessMetric(_Metric):
    """How much of an answer its context backs, by the audit job: the share of claims graded
    ``fully_supported`` (RAGAS's faithfulness: supported statements over all statements).
    ``verdicts`` holds every claim with its support level and the judge's explanation; a claim
    that fell back counts as not supported. ``last_result`` is the whole :class:`AuditResult`
    (its ``decision`` says publish, review or block)."""

    name = "evidex_faithfulness"
    last_result: AuditResult | None = field(default=None, init=False)

    async def _grade(self, case: EvalCase) -> tuple[float, list[Verdict], str]:
        if not case.answer:
            raise InputError("faithfulness needs the answer (actual_output / response)")
        result = await aaudit(case.answer, case.contexts, question=case.question, **self._options())
        self.last_result = result
        verdicts = [
            Verdict(
                item=c.claim_text,
                verdict=c.classification,
                counts=c.classification == "fully_supported" and c.source != "fallback",
                reason=c.explanation,
                source=c.source,
            )
            for c in result.claims
        ]
        if not verdicts:
            return 1.0, [], "the answer makes no factual claim"
        good = sum(v.counts for v in verdicts)
        lacking = [f"{v.item!r} ({v.verdict}: {v.reason})" for v in verdicts if not v.counts]
        reason = f"{good} of {len(verdicts)} claims fully supported by the context"
        reason += "; not: " + "; ".join(lacking) if lacking else ""
        return good / len(verdicts), verdicts, f"{reason}; decision: {result.decision.decision}"


@dataclass
class ContextRelevanceMetric(_Metric):
    """How much of the retrieved context is relevant to the question, by the tier job: the
    share of passages graded in the tiers of ``policy`` (``standard``: the top two; ``strict``:
    the top one; ``broad``: all but the last). ``verdicts`` holds every passage with its tier
    and justification. ``last_result`` is the whole :class:`TierResult`."""

    name = "evidex_context_relevance"
    policy: str = "standard"
    last_result: TierResult | None = field(default=None, init=False)

    async def _grade(self, case: EvalCase) -> tuple[float, list[Verdict], str]:
        if not case.question:
            raise InputError("context relevance needs the question (input / user_input)")
        if not case.contexts:
            raise InputError("context relevance needs the retrieved contexts")
        result = await atier(case.question, case.contexts, **self._options())
        self.last_result = result
        relevant = policy_tiers(result.scheme.names, self.policy)
        verdicts = [
            Verdict(
                item=a.passage_id,
                verdict=a.tier,
                counts=a.tier in relevant,
                reason=a.justification,
                source=a.source,
            )
            for a in result.classifications
        ]
        good = sum(v.counts for v in verdicts)
        reason = (
            f"{good} of {len(verdicts)} passages in {', '.join(relevant)} (policy {self.policy})"
        )
        return good / len(verdicts), verdicts, reason
