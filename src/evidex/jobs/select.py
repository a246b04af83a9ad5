"""Context selection: turn tiers into the generator's context under a token budget.

Policies take a prefix of the tier order: ``strict`` the top tier only, ``standard`` the top two
(the second flagged as supplementary), ``broad`` every tier but the last. The budget is spent
tier by tier, most relevant first, in the input (retrieval) order within a tier; a passage that
does not fit whole is left out with the reason, never cut silently.

Given the result of the sufficiency job on the same query and passages, the selection follows
its decision, so a pipeline can abstain before generating. On ``abstain`` or ``escalate`` there
is no context: every passage is left out (reason ``sufficiency``), and the decision, its reasons
and what was found missing are on the selection, so nothing is generated from passages the
check found lacking, and the caller can say why. On ``answer`` the selection is the tier
selection, unchanged, with each item flagged ``supporting`` when the sufficiency verdict rests
on it; a supporting passage the policy or the budget left out is named in
``supporting_left_out`` (the verdict was given on passages the context no longer holds all of).

Why the tier selection is kept whole by default: the two judgments answer different questions.
The sufficiency check names the passages the answer *needs*, often the fewest that do, while the
tier policy chose what the generator should read, and its top tier may hold the same fact in
other words, or the background the supplementary tier is for. Cutting the context down to the
supporting passages trades that evidence for tokens, so it is opt-in (``supporting_only=True``,
for tight budgets): the others are then left out with reason ``not_supporting``, and the budget
is spent on the supporting passages alone, still in tier order. The order is the tier order in
both cases: the generator reads the most relevant tier first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from evidex._text import estimate_tokens
from evidex.errors import InputError
from evidex.types import Source

if TYPE_CHECKING:
    from evidex.jobs.sufficiency import SufficiencyResult
    from evidex.jobs.tier import TierResult

__all__ = ["POLICIES", "ContextItem", "LeftOut", "SelectedContext", "select_context"]

Policy = Literal["strict", "standard", "broad"]
POLICIES: tuple[str, ...] = ("strict", "standard", "broad")


class ContextItem(BaseModel):
    passage_id: str
    tier: str
    text: str
    tokens: int
    supplementary: bool
    """True outside the top tier: background the generator may use, not cite as proof."""
    source: Source
    supporting: bool | None = None
    """With a sufficiency result: whether its verdict rests on this passage (None: no check)."""


class LeftOut(BaseModel):
    passage_id: str
    tier: str
    reason: Literal["policy", "budget", "sufficiency", "not_supporting"]
    """``policy``: not in the policy's tiers; ``budget``: did not fit; ``sufficiency``: the
    sufficiency decision is not to answer; ``not_supporting``: ``supporting_only`` and the
    sufficiency verdict does not rest on it."""
    tokens: int


class SelectedContext(BaseModel):
    policy: str
    token_budget: int
    tokens_used: int
    items: list[ContextItem]
    left_out: list[LeftOut]
    tokens_by_tier: dict[str, int] = Field(default_factory=dict)
    decision: Literal["answer", "abstain", "escalate"] | None = None
    """The sufficiency decision the selection follows (None: no sufficiency result given)."""
    reasons: list[str] = Field(default_factory=list)
    """Why the sufficiency policy decided so, in its words."""
    missing: list[str] = Field(default_factory=list)
    """What the sufficiency check found the passages lack."""
    supporting_left_out: list[str] = Field(default_factory=list)
    """Passages the sufficiency verdict rests on that the context does not hold."""

    @property
    def generate(self) -> bool:
        """Whether to generate from this context: no sufficiency check, or its decision is
        ``answer``. Otherwise abstain (``abstain``) or hand the query to a person
        (``escalate``), saying :attr:`reasons`."""
        return self.decision in (None, "answer")

    def text(self, separator: str = "\n\n") -> str:
        return separator.join(item.text for item in self.items)


def policy_tiers(names: list[str], policy: str) -> list[str]:
    if policy == "strict":
        return names[:1]
    if policy == "standard":
        return names[:2]
    if policy == "broad":
        return names[:-1] if len(names) > 2 else names[:1]
    raise InputError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")


def select_context(
    result: TierResult,
    policy: Policy | str = "standard",
    token_budget: int = 4000,
    *,
    count_tokens: Callable[[str], int] = estimate_tokens,
    sufficiency: SufficiencyResult | None = None,
    supporting_only: bool = False,
) -> SelectedContext:
    """Pick passages for generation by tier and budget, and say what was left out and why.

    ``sufficiency``: the sufficiency job's result on the same query and passages; the
    selection then follows its decision (no context unless it is ``answer``) and flags the
    passages its verdict rests on; ``supporting_only`` keeps those alone (see the module
    docstring for why it is off by default)."""
    if token_budget <= 0:
        raise InputError(f"token_budget must be positive, got {token_budget}")
    names = result.scheme.names
    allowed = policy_tiers(names, policy)
    texts = {p.passage_id: p.text for p in result.passages}
    supporting = _supporting(result, sufficiency, texts)
    if supporting_only and sufficiency is None:
        raise InputError("supporting_only needs the sufficiency result (sufficiency=...)")
    order = {name: i for i, name in enumerate(names)}
    ranked = sorted(
        enumerate(result.classifications), key=lambda pair: (order[pair[1].tier], pair[0])
    )

    items: list[ContextItem] = []
    left: list[LeftOut] = []
    used = 0
    by_tier = {name: 0 for name in allowed}
    answering = sufficiency is None or sufficiency.decision.decision == "answer"
    for _, a in ranked:
        tokens = count_tokens(texts[a.passage_id])
        if not answering or (supporting_only and a.passage_id not in supporting):
            if not a.duplicate_of:
                reason: Literal["sufficiency", "not_supporting"] = (
                    "not_supporting" if answering else "sufficiency"
                )
                left.append(
                    LeftOut(passage_id=a.passage_id, tier=a.tier, reason=reason, tokens=tokens)
                )
            continue
        if a.tier not in allowed or a.duplicate_of:
            if a.tier not in allowed:
                left.append(
                    LeftOut(passage_id=a.passage_id, tier=a.tier, reason="policy", tokens=tokens)
                )
            continue
        if used + tokens > token_budget:
            left.append(
                LeftOut(passage_id=a.passage_id, tier=a.tier, reason="budget", tokens=tokens)
            )
            continue
        used += tokens
        by_tier[a.tier] += tokens
        items.append(
            ContextItem(
                passage_id=a.passage_id,
                tier=a.tier,
                text=texts[a.passage_id],
                tokens=tokens,
                supplementary=a.tier != names[0],
                source=a.source,
                supporting=None if sufficiency is None else a.passage_id in supporting,
            )
        )
    chosen = {item.passage_id for item in items}
    return SelectedContext(
        policy=policy,
        token_budget=token_budget,
        tokens_used=used,
        items=items,
        left_out=left,
        tokens_by_tier=by_tier,
        **({} if sufficiency is None else _followed(sufficiency, supporting, chosen, answering)),
    )


def _supporting(
    result: TierResult, sufficiency: SufficiencyResult | None, texts: dict[str, str]
) -> list[str]:
    """The passage ids the sufficiency verdict rests on, checked against the tier result: the
    same query, and ids among its passages (a check of other passages says nothing here)."""
    if sufficiency is None:
        return []
    if " ".join(sufficiency.query.split()) != " ".join(result.query.split()):
        raise InputError(
            f"the sufficiency result is for the query {sufficiency.query!r}, the tier result "
            f"for {result.query!r}: check the same query and passages"
        )
    unknown = [pid for pid in sufficiency.supporting_passage_ids if pid not in texts]
    if unknown:
        raise InputError(
            f"the sufficiency result rests on passage(s) {unknown} that the tier result does "
            "not hold: check the same query and passages"
        )
    return list(sufficiency.supporting_passage_ids)


def _followed(
    sufficiency: SufficiencyResult, supporting: list[str], chosen: set[str], answering: bool
) -> dict[str, Any]:
    return {
        "decision": sufficiency.decision.decision,
        "reasons": [r.message for r in sufficiency.decision.reasons],
        "missing": list(sufficiency.missing),
        "supporting_left_out": [p for p in supporting if p not in chosen] if answering else [],
    }
