"""The rerank job's review payload: the query, its candidates, and what the judge made of them
(a grounding check's tier per top passage; a fallback's retrieval order), and the decisions.

Decisions: a ranking of the item's passage ids, best first, each at most once (a JSON array or
a comma list), ``accept`` or ``reject``. A ranking becomes a :class:`~evidex.evaluate.golden.
RerankGolden` row whose grades are the ranking's positions (best of *n* graded *n*, the next
*n − 1*, ..., unranked candidates 0): an order said as graded judgments, which is what nDCG
reads. ``accept`` gives a row only where the judge ranked (a grounding check's order); a
fallback's order is retrieval order, not a judgment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from evidex.errors import InputError
from evidex.jobs._review import (
    VERDICTS,
    ExportContext,
    FormFields,
    FormVerdict,
    JudgedPassage,
    PassageGrade,
    ReviewKind,
    ReviewPayload,
    _Lenient,
    missing_choice,
    short,
)

__all__ = ["REVIEW", "RerankReview"]


class GroundingCheck(_Lenient):
    """Whether the top-k answered the query (see ``jobs._rerank_grounding.Grounding``)."""

    answered: bool | None = None
    supporting: list[str] = Field(default_factory=list)
    checked: list[str] = Field(default_factory=list)
    tiers: dict[str, str] = Field(default_factory=dict)
    reason: str | None = None
    source: str | None = None


class RankedRef(JudgedPassage):
    """A passage of a stored ranking, scores or comparison, by id (its tier: the grounding
    check's)."""

    rank: int | None = None
    relevance_score: float | None = None


class RerankFallbackValue(_Lenient):
    """A fallback's value, whichever step fell back: a ranking (allpairs, listwise), scores
    (pointwise), a comparison (pairwise) or tiers (the grounding check)."""

    ranked_passages: list[RankedRef] = Field(default_factory=list)
    scores: list[RankedRef] = Field(default_factory=list)
    classifications: list[RankedRef] = Field(default_factory=list)
    winner: str | None = None
    justification: str | None = None


class RerankReview(ReviewPayload):
    """A rerank item: a grounding check that found the top-k does not answer the query, or a
    step (a ranking, a window, a comparison, a score batch) that fell back."""

    query: str = ""
    strategy: str | None = None
    flag: str | None = None
    grounding: GroundingCheck | None = None
    fallback: RerankFallbackValue | None = None
    job_word: ClassVar[str] = "rerank"

    def grades(self) -> dict[str, PassageGrade]:
        found: dict[str, PassageGrade] = {}
        for step in self.steps or []:
            value = RerankFallbackValue.model_validate(step.fallback or {})
            self._fallback_grades(value, found)
        if self.fallback is not None:
            self._fallback_grades(self.fallback, found)
        if self.grounding is not None:
            checked = self.grounding.checked
            for position, pid in enumerate(checked, 1):
                tier = self.grounding.tiers.get(pid)
                fell_back = self.grounding.source == "fallback"
                word = f"rank {position}" + (f" · {tier}" if tier else "")
                found[pid] = PassageGrade(word, self.grounding.reason, fell_back)
        return found

    @staticmethod
    def _fallback_grades(value: RerankFallbackValue, found: dict[str, PassageGrade]) -> None:
        for r in value.ranked_passages or value.scores:
            word = f"rank {r.rank}" if r.rank else "retrieval order"
            found[r.passage_id] = PassageGrade(word, r.justification, True)
        for r in value.classifications:
            if r.tier:
                found[r.passage_id] = PassageGrade(r.tier, r.justification, True)

    def judge_values(self) -> list[str]:
        return [g.grade for g in self.grades().values()]

    @property
    def judged_order(self) -> list[str]:
        """The order the judge gave (a grounding check's top-k), empty for a fallback."""
        g = self.grounding
        return list(g.checked) if g is not None and g.source != "fallback" else []

    # ------------------------------------------------------------------ decisions

    def allowed(self, passage_ids: Sequence[str]) -> str:
        return (
            f"allowed: {', '.join(VERDICTS)}, or a ranking of the item's passage ids "
            f"({short(list(passage_ids))}) as a JSON array or a comma list"
        )

    def check(self, value: str, passage_ids: Sequence[str]) -> str:
        if value.lower() in VERDICTS:
            return value.lower()
        if value.startswith("["):
            ranking = [str(v) for v in self.parse_json(value, list, passage_ids)]
        else:
            ranking = [part.strip() for part in value.split(",") if part.strip()]
        unknown = sorted(set(ranking) - set(passage_ids))
        if not ranking or unknown or len(set(ranking)) != len(ranking):
            if len(ranking) <= 1 and not value.startswith("[") and unknown:
                raise self.not_allowed(value, passage_ids)
            raise InputError(
                f"a ranking lists this item's passage ids ({short(list(passage_ids))}), best "
                "first, each at most once" + (f"; unknown: {short(unknown)}" if unknown else "")
            )
        return json.dumps(ranking, ensure_ascii=False)

    def from_form(self, verdict: str, form: FormFields, passage_ids: Sequence[str]) -> str:
        """``accept``, ``reject``, or the ranking the reviewer typed: every passage its own
        rank from 1 to n. Nothing stands in for a rank left out (retrieval order is no
        decision), so a missing, out-of-range or repeated rank is refused, naming the passage."""
        typed = any(form.get(f"rank_p{i}").strip() for i in range(len(passage_ids)))
        verdict = _FORM.resolve(verdict, entered=typed, can_accept=bool(self.judged_order))
        if verdict != "ranking":
            return verdict
        n = len(passage_ids)
        ranks: dict[str, int] = {}
        for i, pid in enumerate(passage_ids):
            try:
                ranks[pid] = int(form.get(f"rank_p{i}").strip())
            except ValueError:
                continue
        lacking = [pid for pid in passage_ids if not 1 <= ranks.get(pid, 0) <= n]
        if lacking:
            raise missing_choice(f"the rank of {short(lacking)}", f"a number from 1 to {n}")
        taken: dict[int, list[str]] = {}
        for pid, r in ranks.items():
            taken.setdefault(r, []).append(pid)
        shared = {r: pids for r, pids in sorted(taken.items()) if len(pids) > 1}
        if shared:
            r, pids = next(iter(shared.items()))
            raise InputError(
                f"rank {r} is given to {short(pids)}: give each passage its own rank from 1 "
                f"to {n}; nothing was recorded"
            )
        return json.dumps(sorted(passage_ids, key=lambda pid: ranks[pid]), ensure_ascii=False)

    # ------------------------------------------------------------------ golden labels

    def ranking(self, decision: str) -> list[str]:
        if decision.lower() == "accept":
            if not self.judged_order:
                raise InputError("'accept' on a fallback accepts retrieval order: no judgment")
            return self.judged_order
        if decision.lower() == "reject":
            raise InputError("'reject' says the ranking is wrong, not what it is")
        if decision.startswith("["):
            return [str(x) for x in json.loads(decision)]
        return [part.strip() for part in decision.split(",") if part.strip()]

    def golden(
        self, item_id: int, decision: str, passage_ids: Sequence[str], context: ExportContext
    ) -> tuple[list[BaseModel], list[str]]:
        order = self.ranking(decision)
        candidates, missing = self.shown_passages(passage_ids, context)
        if not candidates:
            raise InputError("no candidate text in the item; pass the corpus")
        grades = {pid: len(order) - i for i, pid in enumerate(order)}
        record = context.row(query=self.query, candidates=candidates, grades=grades)
        return [record], missing

    def meaning(self, decision: str, passage_ids: Sequence[str]) -> dict[str, str]:
        """The ranking as one unit (``accept``: the judge's), or ``reject``."""
        try:
            return {"": json.dumps(self.ranking(decision), ensure_ascii=False)}
        except (InputError, ValueError):
            return super().meaning(decision, passage_ids)


# This kind's review form in words; the rule is FormVerdict's (one for every kind).
_FORM = FormVerdict(
    own="ranking",
    choose=("the ranking", "rank every passage, accept the judge's, or reject"),
    nothing_to_accept="this item has no judge ranking to confirm (its order is retrieval order, "
    "kept by a fallback); rank the passages yourself or reject",
)


REVIEW = ReviewKind(payload=RerankReview, template="jobs/rerank.html", kappa=False)
