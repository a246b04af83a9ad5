"""What happens to an audited answer: the publish / review / block decision, the rolling
baseline of the unsupported ratio and its alert, and the support-level metrics.

All of it is computed by code from the recomputed summary, never read from a judge's reply.
The decision object is the one piece of an audit meant to travel towards end users, so it
holds codes, counts and reasons written here, and no judge output at all.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from evidex.harness.events import AuditRecord
from evidex.jobs._fields import Flag
from evidex.tasks.audit import SUPPORT_LEVELS, AuditSummary
from evidex.types import RiskLevel, Source

__all__ = [
    "DISTRIBUTION_STEP",
    "AuditDecision",
    "AuditPolicy",
    "Baseline",
    "BaselineAlert",
    "Decision",
    "DecisionReason",
    "SupportLevelMetrics",
    "audit_metrics",
    "decide",
    "read_baseline",
    "unsupported_ratio",
]

Decision = Literal["publish", "review", "block"]
ReasonCode = Literal[
    "no_claims",
    "within_policy",
    "fallback",
    "contradicted",
    "unsupported_ratio",
    "high_risk_signoff",
    "suspected_injection",
]
DISTRIBUTION_STEP = "audit.distribution"
"""The ``step`` of the audit-log note row that records each audited answer's distribution."""

_SEVERITY: dict[Decision, int] = {"publish": 0, "review": 1, "block": 2}


MAX_BASELINE = 1_000_000
"""The largest baseline window (and minimum): the window is a row limit of an audit-log query,
which a database refuses past 64 bits; a million answers is more history than a baseline
needs."""


class AuditPolicy(BaseModel):
    """Settings of the decision and of the baseline alert. Unknown names are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    unsupported_threshold: Annotated[
        float,
        Flag("--threshold", metavar="RATIO"),
        Field(
            ge=0.0,
            le=1.0,
            description="Unsupported ratio above which an answer goes to review (the spec's 30 %).",
        ),
    ] = 0.30
    inferred_counts_as_unsupported_in_high_risk: Annotated[
        bool,
        Flag("--count-inferred"),
        Field(
            description="In high risk, inferred claims count in the ratio and need sign-off "
            "like unsupported ones."
        ),
    ] = True
    on_contradiction: Annotated[
        Literal["block", "review"],
        Field(description="What a contradicted claim does to the answer."),
    ] = "block"
    baseline_window: Annotated[
        int,
        Flag(metavar="N"),
        Field(
            ge=1,
            le=MAX_BASELINE,
            description="How many recent audited answers form the baseline.",
        ),
    ] = 200
    baseline_min_answers: Annotated[
        int,
        Flag(metavar="N"),
        Field(
            ge=1,
            le=MAX_BASELINE,
            description="No baseline alert until the baseline holds this many answers.",
        ),
    ] = 20
    alert_margin: Annotated[
        float,
        Flag(metavar="RATIO"),
        Field(
            ge=0.0,
            le=1.0,
            description="Alert when an answer's unsupported ratio exceeds the baseline by more "
            "than this.",
        ),
    ] = 0.10


class DecisionReason(BaseModel):
    code: ReasonCode
    message: str


class AuditDecision(BaseModel):
    """The verdict a caller may act on or show: no claim texts, quotes, explanations or raw
    judge output, only counts and reasons written by code."""

    model_config = ConfigDict(frozen=True)

    answer_id: str
    decision: Decision
    reasons: list[DecisionReason]
    summary: AuditSummary
    unsupported_ratio: float


def unsupported_ratio(summary: AuditSummary, risk: RiskLevel, policy: AuditPolicy) -> float:
    """Share of claims that count as unsupported (inferred ones too in high risk, by policy)."""
    if summary.total_claims == 0:
        return 0.0
    bad = summary.unsupported
    if risk is RiskLevel.HIGH and policy.inferred_counts_as_unsupported_in_high_risk:
        bad += summary.inferred
    return bad / summary.total_claims


def decide(
    answer_id: str,
    summary: AuditSummary,
    *,
    risk: RiskLevel,
    policy: AuditPolicy,
    source: Source = "judge",
    suspected: str | None = None,
) -> AuditDecision:
    """Apply the rules; the strictest outcome wins and every rule that fired is a reason.
    ``suspected``: why flagged evidence sends the answer to a person (the job's risk said so)."""
    ratio = unsupported_ratio(summary, risk, policy)
    reasons: list[tuple[Decision, DecisionReason]] = []
    if suspected:
        reasons.append(("review", _reason("suspected_injection", suspected)))
    if source == "fallback":
        reasons.append(
            (
                "review",
                _reason(
                    "fallback",
                    "a judge reply stayed invalid after its retries (marked fallback); a person "
                    "must check",
                ),
            )
        )
    if summary.contradicted:
        reasons.append(
            (
                policy.on_contradiction,
                _reason("contradicted", f"{summary.contradicted} claim(s) contradict the sources"),
            )
        )
    if ratio > policy.unsupported_threshold:
        reasons.append(
            (
                "review",
                _reason(
                    "unsupported_ratio",
                    f"{ratio:.0%} of claims are unsupported, above the "
                    f"{policy.unsupported_threshold:.0%} threshold",
                ),
            )
        )
    if risk is RiskLevel.HIGH:
        needing = summary.unsupported + (
            summary.inferred if policy.inferred_counts_as_unsupported_in_high_risk else 0
        )
        if needing:
            kinds = (
                "unsupported or inferred"
                if policy.inferred_counts_as_unsupported_in_high_risk
                else "unsupported"
            )
            reasons.append(
                (
                    "review",
                    _reason(
                        "high_risk_signoff",
                        f"high risk: {needing} {kinds} claim(s) need a person's sign-off",
                    ),
                )
            )
    if not reasons:
        quiet = (
            _reason("no_claims", "the answer makes no factual claims")
            if summary.total_claims == 0
            else _reason("within_policy", "every claim is within the audit policy")
        )
        reasons.append(("publish", quiet))
    decision = max((d for d, _ in reasons), key=_SEVERITY.__getitem__)
    return AuditDecision(
        answer_id=answer_id,
        decision=decision,
        reasons=[r for _, r in reasons],
        summary=summary,
        unsupported_ratio=round(ratio, 4),
    )


def _reason(code: ReasonCode, message: str) -> DecisionReason:
    return DecisionReason(code=code, message=message)


# ---------------------------------------------------------------------------------- baseline


class Baseline(BaseModel):
    """Pooled unsupported ratio of recent judged answers (claims-weighted)."""

    answers: int
    claims: int
    unsupported_ratio: float


class BaselineAlert(BaseModel):
    answer_id: str
    unsupported_ratio: float
    baseline: float
    margin: float
    message: str


@runtime_checkable
class AuditRowReader(Protocol):
    """The part of a store the baseline reads (a store's ``audit_rows`` takes more filters)."""

    def audit_rows(
        self, *, last: int | None = None, job: str | None = None, step: str | None = None
    ) -> Any: ...


def read_baseline(store: object, policy: AuditPolicy) -> Baseline | None:
    """The baseline from the last ``baseline_window`` distribution notes in the audit log.

    Answers that fell back are left out (they were not judged). ``None`` when the store cannot
    be read this way or holds fewer than ``baseline_min_answers`` judged answers.
    """
    if not isinstance(store, AuditRowReader):
        return None
    rows = store.audit_rows(last=policy.baseline_window, job="audit", step=DISTRIBUTION_STEP)
    claims = unsupported = answers = 0
    for row in rows:
        detail = row.get("detail") or {}
        if detail.get("source") == "fallback":
            continue
        answers += 1
        claims += int(detail.get("total_claims", 0))
        unsupported += int(detail.get("unsupported", 0))
    if answers < policy.baseline_min_answers:
        return None
    return Baseline(
        answers=answers, claims=claims, unsupported_ratio=unsupported / claims if claims else 0.0
    )


def check_alert(
    answer_id: str, summary: AuditSummary, baseline: Baseline | None, policy: AuditPolicy
) -> BaselineAlert | None:
    """An alert when this answer's plain unsupported ratio rises above the baseline by more
    than the margin (plain: the same measure the baseline pools, whatever the risk)."""
    if baseline is None or summary.total_claims == 0:
        return None
    ratio = summary.unsupported / summary.total_claims
    if ratio <= baseline.unsupported_ratio + policy.alert_margin:
        return None
    return BaselineAlert(
        answer_id=answer_id,
        unsupported_ratio=round(ratio, 4),
        baseline=round(baseline.unsupported_ratio, 4),
        margin=policy.alert_margin,
        message=f"unsupported ratio {ratio:.0%} is above the baseline "
        f"{baseline.unsupported_ratio:.0%} of the last {baseline.answers} answers by more than "
        f"{policy.alert_margin:.0%}",
    )


# ---------------------------------------------------------------------------------- metrics


class SupportLevelMetrics:
    """Counts of audited claims by support level and risk, fed by the distribution notes on
    the harness hooks; the service can export them next to the harness metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.claims: Counter[tuple[str, str]] = Counter()
        self.decisions: Counter[str] = Counter()
        self.alerts = 0

    def observe(self, record: AuditRecord) -> None:
        if record.job != "audit" or record.step != DISTRIBUTION_STEP:
            return
        detail = record.detail
        risk = str(detail.get("risk", "low"))
        with self._lock:
            for level in (*SUPPORT_LEVELS, "contradicted"):
                self.claims[(risk, level)] += int(detail.get(level, 0))
            self.decisions[str(detail.get("decision"))] += 1
            self.alerts += 1 if detail.get("alert") else 0

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "claims": {
                    f"{risk}.{level}": n for (risk, level), n in sorted(self.claims.items())
                },
                "decisions": dict(sorted(self.decisions.items())),
                "alerts": self.alerts,
            }

    def distribution(self, levels: Sequence[str] = SUPPORT_LEVELS) -> dict[str, int]:
        """Claims per support level over every risk."""
        with self._lock:
            return {
                lv: sum(n for (_, level), n in self.claims.items() if level == lv) for lv in levels
            }


_METRICS = SupportLevelMetrics()


def audit_metrics() -> SupportLevelMetrics:
    """The process-wide support-level counters every audit reports to."""
    return _METRICS
