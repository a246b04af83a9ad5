"""How well each judge agrees with the reviewers: Cohen's kappa between the judge's grade and
the reviewer's decision over resolved review items, per job × judge × prompt version.

The reviewer's side is the golden label the decision stands for, read by the item's job's
review payload model (``JobDefinition.review``), the same reading ``evidex review export``
makes: a tier, a label or ``accept`` names the label; a claim status per claim, or one for all
claims; ``reject`` says only what the grade is not, so it gives no pair. A job whose decisions
are rankings (its ``ReviewKind.kappa`` false) has no kappa.

Kappa is :func:`evidex.evaluate.metrics.cohen_kappa`; its interval is the percentile bootstrap
of :func:`evidex.evaluate.metrics.bootstrap_ci` over review items (an item's passages or claims
resample together), 1000 resamples, seed 0, so the page shows the same numbers on every load.

Beside it, per job, how far the reviewers agree with each other (:func:`reviewer_agreement`):
over the items that two or more reviewers decided (the queue's ``[review]`` settings ask for
that), Cohen's kappa between each item's first and second decision, unit by unit (a passage's
tier, a claim's status, the item's label or verdict; ``reject`` is a label of its own), as the
job's review model reads them, with the same bootstrap. It is the ceiling the judge's kappa is
read against: a judge cannot be expected to agree with a reviewer more than reviewers agree
with each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidex.errors import EvidexError
from evidex.evaluate.calibration import CALIBRATION_FILE, check_calibration
from evidex.evaluate.metrics import bootstrap_ci, cohen_kappa
from evidex.jobs import review_kind

__all__ = ["AgreementRow", "ReviewerRow", "agreement", "pairs_of", "reviewer_agreement"]

Pair = tuple[str, str]
"""(reviewer's label, judge's label)."""


@dataclass
class AgreementRow:
    job: str
    judge_id: str
    prompt_version: str
    model_version: str = ""
    items: int = 0
    """Resolved items of this group."""
    units: list[list[Pair]] = field(default_factory=list)
    """Per item that gave pairs, its pairs (the bootstrap's units)."""
    labels: list[str] = field(default_factory=list)
    kappa: float | None = None
    low: float | None = None
    high: float | None = None
    no_pair: int = 0
    """Items that gave no pair (a reject, a fallback with no judge grade, a ranking)."""
    kappa_applies: bool = True
    """Whether the job's decisions pair with grades at all (a ranking does not)."""
    calibration: str | None = None
    """The calibration record checked, if there is one."""
    stale: list[str] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return sum(len(u) for u in self.units)


def pairs_of(item: Mapping[str, Any]) -> tuple[list[Pair], list[str]]:
    """The (reviewer, judge) label pairs a resolved item gives, and the labels they range
    over, as the item's job reads its decision (its review payload model). A graded value of
    a fallback is no judge grade: such items give no pair."""
    return review_kind(str(item.get("job"))).pairs(item)


def _kappa(labels: Sequence[str]) -> Any:
    def statistic(units: Sequence[list[Pair]]) -> float:
        flat = [p for unit in units for p in unit]
        if not flat:
            return math.nan
        return cohen_kappa([g for g, _ in flat], [j for _, j in flat], labels)

    return statistic


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _interval(units: Sequence[list[Pair]], labels: Sequence[str]) -> tuple[float | None, ...]:
    """Kappa over ``units`` and its 95% bootstrap interval (None where undefined)."""
    interval = bootstrap_ci(units, _kappa(labels), samples=1000, seed=0)
    return _number(interval.value), _number(interval.low), _number(interval.high)


@dataclass
class ReviewerRow:
    """How far the reviewers of one job agree with each other."""

    job: str
    items: int = 0
    """Items that two or more reviewers decided."""
    agreed: int = 0
    """Of them, those whose decisions all mean the same."""
    disputed: int = 0
    """Items whose reviewers disagree, waiting for an adjudication."""
    adjudicated: int = 0
    """Items whose reviewers disagreed, settled by an adjudication."""
    units: list[list[Pair]] = field(default_factory=list)
    """Per item, its (first reviewer, second reviewer) label pairs (the bootstrap's units)."""
    kappa: float | None = None
    low: float | None = None
    high: float | None = None
    kappa_applies: bool = True

    @property
    def pairs(self) -> int:
        return sum(len(u) for u in self.units)

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.items if self.items else None


def reviewer_agreement(items: Iterable[Mapping[str, Any]]) -> list[ReviewerRow]:
    """One row per job over ``items`` that two or more reviewers decided, each with its
    reviewers' ``decisions`` in the order they were made (the store's ``decided_items``)."""
    rows: dict[str, ReviewerRow] = {}
    for item in items:
        decisions = [str(x["decision"]) for x in item.get("decisions") or []]
        if len(decisions) < 2:
            continue
        job = str(item.get("job"))
        kind = review_kind(job)
        row = rows.setdefault(job, ReviewerRow(job, kappa_applies=kind.kappa))
        row.items += 1
        try:
            meanings = [kind.meaning(item, x) for x in decisions]
            first, second = (kind.units(item, x) for x in decisions[:2])
        except (ValueError, TypeError, AttributeError):  # a decision the model cannot read
            continue
        same = all(m == meanings[0] for m in meanings[1:])
        row.agreed += same
        status = item.get("status")
        row.disputed += status == "disputed"
        row.adjudicated += status == "resolved" and not same
        pairs = [(first[unit], second[unit]) for unit in first if unit in second]
        if pairs:
            row.units.append(pairs)
    for row in rows.values():
        labels = sorted({label for unit in row.units for pair in unit for label in pair})
        if row.kappa_applies and row.units and len(labels) >= 2:
            row.kappa, row.low, row.high = _interval(row.units, labels)
    return sorted(rows.values(), key=lambda r: r.job)


def agreement(
    items: Iterable[Mapping[str, Any]],
    provenance: Mapping[str, Mapping[str, str]],
    reports: Path,
) -> list[AgreementRow]:
    """One row per job × judge × prompt version over resolved ``items``; ``provenance`` is
    the store's ``run_provenance`` of their runs, ``reports`` the folder where ``evidex
    calibrate`` writes ``calibration-JOB/calibration.json``."""
    groups: dict[tuple[str, str, str], AgreementRow] = {}
    for item in items:
        if item.get("status") != "resolved":
            continue
        prov = provenance.get(str(item.get("run_id")), {})
        key = (
            str(item.get("job")),
            prov.get("judge_id") or "unknown",
            prov.get("prompt_version") or "unknown",
        )
        row = groups.setdefault(
            key,
            AgreementRow(
                *key,
                model_version=prov.get("model_version") or "",
                kappa_applies=review_kind(key[0]).kappa,
            ),
        )
        row.items += 1
        try:
            pairs, labels = pairs_of(item)
        except (ValueError, TypeError, AttributeError):  # a decision the export cannot read
            pairs, labels = [], []
        row.labels = row.labels or labels
        if pairs:
            row.units.append(pairs)
        else:
            row.no_pair += 1
    for row in groups.values():
        if row.units and len(row.labels) >= 2:
            row.kappa, row.low, row.high = _interval(row.units, row.labels)
        path = reports / f"calibration-{row.job}" / CALIBRATION_FILE
        if path.is_file() and row.judge_id != "unknown":
            row.calibration = str(path)
            try:
                row.stale = check_calibration(
                    path, row.judge_id, row.model_version, row.prompt_version
                )
            except (EvidexError, OSError, ValueError) as exc:
                row.stale = [f"cannot read the calibration record {path}: {exc}"]
    return sorted(groups.values(), key=lambda r: (r.job, r.judge_id, r.prompt_version))
