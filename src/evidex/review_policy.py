"""Who decides a review item, and how many people must: the review queue's settings.

In the config file (:mod:`evidex.config`)::

    [review]
    decisions = 1                                    # independent decisions an item needs
    rules = [
      { risk = "high", decisions = 2 },              # two reviewers for every high-risk item
      { job = "audit", reason = "fallback", assign = "ana" },
    ]

A rule matches an item when each of ``job``, ``risk`` and ``reason`` that it names matches
(``reason`` is the kind of the item's reason, :func:`reason_kind`: ``fallback``, ``high
risk``, ``low confidence`` ...). For ``decisions`` and for ``assign``, the first matching rule
that names one wins; an item that no rule gives a count takes ``decisions``. The store applies
them once, when it queues an item (``SqlStore.add_review``); an admin may assign an item again
later (``evidex review assign``, the UI).

Several decisions per item are how a team measures how far its reviewers agree (the
inter-reviewer kappa of ``/ui/agreement``), the ceiling a judge's agreement with them is read
against; a disagreement waits for an admin's adjudication before it becomes a golden label.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evidex._registered import JOBS
from evidex.types import RiskLevel

__all__ = ["MAX_DECISIONS", "ReviewRoute", "ReviewRule", "ReviewSettings", "reason_kind"]

MAX_DECISIONS = 10
"""The most independent decisions one item may ask for."""


def reason_kind(reason: str) -> str:
    """The kind of a review reason, for rules and filters: reasons are sentences with numbers
    in them (``fallback after 3 attempt(s): ...``), and one value per sentence would not group
    anything."""
    text = reason.strip().lower()
    if text.startswith("fallback"):
        return "fallback"
    if text.startswith("high risk"):
        return "high risk"
    if text.startswith("confidence") and "below the threshold" in text:
        return "low confidence"
    head = re.split(r"[:;(]", text, maxsplit=1)[0].strip()
    return re.sub(r"\d+(\.\d+)?", "N", head)[:40] or "other"


class ReviewRoute(NamedTuple):
    """What the settings give one item: how many decisions it needs, and its assignee."""

    decisions: int
    assignee: str | None


class ReviewRule(BaseModel):
    """One rule: which items (by job, risk, reason kind) and what they get (a number of
    decisions, an assignee)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str | None = None
    risk: RiskLevel | None = None
    reason: str | None = Field(
        default=None, description="a reason kind: fallback, high risk, low confidence ..."
    )
    decisions: int | None = Field(default=None, ge=1, le=MAX_DECISIONS)
    assign: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("job")
    @classmethod
    def _known_job(cls, job: str | None) -> str | None:
        if job is not None and job not in JOBS:
            raise ValueError(f"unknown job {job!r}; jobs are {sorted(JOBS)}")
        return job

    @field_validator("reason")
    @classmethod
    def _reason_kind(cls, reason: str | None) -> str | None:
        return None if reason is None else reason.strip().lower()

    @model_validator(mode="after")
    def _gives_something(self) -> ReviewRule:
        if self.decisions is None and self.assign is None:
            raise ValueError("a review rule gives decisions, assign, or both")
        return self

    def matches(self, job: str, risk: str, reason: str) -> bool:
        return (
            (self.job is None or self.job == job)
            and (self.risk is None or self.risk.value == risk)
            and (self.reason is None or self.reason == reason_kind(reason))
        )


class ReviewSettings(BaseModel):
    """The ``[review]`` table of the settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    decisions: int = Field(
        default=1,
        ge=1,
        le=MAX_DECISIONS,
        description="independent decisions an item needs unless a rule says otherwise",
    )
    rules: list[ReviewRule] = Field(default_factory=list)

    def route(self, job: str, risk: str, reason: str) -> ReviewRoute:
        """The number of decisions and the assignee of a new item of ``job`` raised at
        ``risk`` for ``reason``."""
        decisions: int | None = None
        assignee: str | None = None
        for rule in self.rules:
            if not rule.matches(job, risk, reason):
                continue
            if decisions is None and rule.decisions is not None:
                decisions = rule.decisions
            if assignee is None and rule.assign is not None:
                assignee = rule.assign
        return ReviewRoute(decisions or self.decisions, assignee)
