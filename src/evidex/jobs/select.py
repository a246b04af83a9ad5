"""Context selection: turn tiers into the generator's context under a token budget.

Policies take a prefix of the tier order: ``strict`` the top tier only, ``standard`` the top two
(the second flagged as supplementary), ``broad`` every tier but the last. The budget is spent
tier by tier, most relevant first, in the input (retrieval) order within a tier; a passage that
does not fit whole is left out with the reason, never cut silently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from evidex._text import estimate_tokens
from evidex.errors import InputError
from evidex.types import Source

if TYPE_CHECKING:
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


class LeftOut(BaseModel):
    passage_id: str
    tier: str
    reason: Literal["policy", "budget"]
    tokens: int


class SelectedContext(BaseModel):
    policy: str
    token_budget: int
    tokens_used: int
    items: list[ContextItem]
    left_out: list[LeftOut]
    tokens_by_tier: dict[str, int] = Field(default_factory=dict)

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
) -> SelectedContext:
    """Pick passages for generation by tier and budget, and say what was left out and why."""
    if token_budget <= 0:
        raise InputError(f"token_budget must be positive, got {token_budget}")
    names = result.scheme.names
    allowed = policy_tiers(names, policy)
    texts = {p.passage_id: p.text for p in result.passages}
    order = {name: i for i, name in enumerate(names)}
    ranked = sorted(
        enumerate(result.classifications), key=lambda pair: (order[pair[1].tier], pair[0])
    )

    items: list[ContextItem] = []
    left: list[LeftOut] = []
    used = 0
    by_tier = {name: 0 for name in allowed}
    for _, a in ranked:
        tokens = count_tokens(texts[a.passage_id])
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
            )
        )
    return SelectedContext(
        policy=policy,
        token_budget=token_budget,
        tokens_used=used,
        items=items,
        left_out=left,
        tokens_by_tier=by_tier,
    )
