"""The classify consistency check: is a classification stable under repetition and reordering?

The spec asks for consistency checks before trusting labels at scale. One input is classified
``runs`` times with the passages in their given order and ``runs`` times shuffled (seeded), and
the report gives the label agreement and the confidence spread of each label.

The repeated runs bypass the cache (``HarnessSettings(use_cache=False)``): a cache hit would
return the first answer again and make any input look perfectly stable. They route nothing to
review (a diagnostic should not flood the queue), but every call is in the audit log.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from evidex.errors import InputError
from evidex.harness.job import run_planned
from evidex.jobs._common import sync_of
from evidex.jobs.classify import DEFINITION, ClassifyCall, ClassifyInput, ClassifySpec
from evidex.taxonomy import Taxonomy
from evidex.types import PassageLike, Source

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "ConsistencyReport",
    "ConsistencyRun",
    "LabelSpread",
    "aconsistency_check",
    "consistency_check",
]


class ConsistencyRun(BaseModel):
    """One of the repeated classifications."""

    order: Literal["original", "shuffled"]
    passage_order: list[str]
    labels: list[str]
    confidences: dict[str, float]
    unclassifiable: bool
    source: Source


class LabelSpread(BaseModel):
    """How often a label was assigned, and how much its confidence moved."""

    label: str
    share: float = Field(description="fraction of runs that assigned the label")
    confidence_min: float
    confidence_max: float
    confidence_mean: float
    confidence_stdev: float = Field(description="population standard deviation")


class ConsistencyReport(BaseModel):
    runs: list[ConsistencyRun]
    modal_labels: list[str] = Field(description="the most frequent label set (empty: none)")
    agreement: float = Field(description="share of all runs whose label set is the modal one")
    repeat_agreement: float = Field(description="the same, over the original-order runs")
    shuffle_agreement: float = Field(description="the same, over the shuffled runs")
    labels: list[LabelSpread]
    fallbacks: int

    @property
    def stable(self) -> bool:
        """Every run gave the same label set."""
        return self.agreement == 1.0


async def aconsistency_check(
    input: str,
    passages: Iterable[PassageLike],
    taxonomy: Taxonomy | Any,
    *,
    runs: int = 3,
    seed: int = 0,
    **options: Unpack[ClassifyCall],
) -> ConsistencyReport:
    """Classify ``input`` ``runs`` times as given and ``runs`` times with shuffled passages.

    Preflight runs once, so every run sees the same passages (only their order changes). Runs
    are sequential: concurrent calls to one local model would only queue.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise InputError(f"runs must be a positive whole number, got {runs!r}")
    given = ClassifyInput(input=input, passages=list(passages))
    (item,) = DEFINITION.inputs([given], options.get("limits"))
    harness, prepared = DEFINITION.prepare({**options, "labels": taxonomy})
    assert isinstance(prepared, ClassifySpec)  # the classify job's own spec
    spec = dataclasses.replace(prepared, route=False)
    harness.settings = dataclasses.replace(harness.settings, use_cache=False)
    plan = spec.plan(item, harness.judge)
    rng = random.Random(seed)
    results: list[ConsistencyRun] = []
    for order in ("original", "shuffled"):
        for _ in range(runs):
            this = plan
            if order == "shuffled":
                shuffled = list(plan.data.batch.passages)
                rng.shuffle(shuffled)
                batch = dataclasses.replace(plan.data.batch, passages=tuple(shuffled))
                this = dataclasses.replace(plan, data=dataclasses.replace(plan.data, batch=batch))
            result = await run_planned(harness, spec, this, None)
            results.append(
                ConsistencyRun(
                    order=order,
                    passage_order=result.passage_ids,
                    labels=sorted(result.labels),
                    confidences={a.label: a.confidence for a in result.classifications},
                    unclassifiable=result.unclassifiable,
                    source=result.source,
                )
            )
    return summarise(results)


consistency_check = sync_of(aconsistency_check)


def summarise(runs: list[ConsistencyRun]) -> ConsistencyReport:
    """Agreement and spreads of a list of runs (pure; the arithmetic the report shows)."""
    sets = Counter(tuple(r.labels) for r in runs)
    modal = list(sets.most_common(1)[0][0])  # on a tie, the set seen first

    def agreement(subset: list[ConsistencyRun]) -> float:
        if not subset:
            return 0.0
        return sum(r.labels == modal for r in subset) / len(subset)

    spreads = []
    for label in sorted({lab for r in runs for lab in r.labels}):
        values = [r.confidences[label] for r in runs if label in r.confidences]
        spreads.append(
            LabelSpread(
                label=label,
                share=len(values) / len(runs),
                confidence_min=min(values),
                confidence_max=max(values),
                confidence_mean=statistics.fmean(values),
                confidence_stdev=statistics.pstdev(values),
            )
        )
    return ConsistencyReport(
        runs=runs,
        modal_labels=modal,
        agreement=agreement(runs),
        repeat_agreement=agreement([r for r in runs if r.order == "original"]),
        shuffle_agreement=agreement([r for r in runs if r.order == "shuffled"]),
        labels=spreads,
        fallbacks=sum(r.source == "fallback" for r in runs),
    )
