"""Consistency: does the judge give the same labels when nothing that should matter changes?

The spec asks for consistency checks across retrieval batches: a passage's tier must not
depend on its neighbours or its position. We re-run the same queries with the passages
shuffled and cut into batches of other sizes, with the cache off (a cached answer would agree
with itself by construction), and report Cohen's kappa between the first run and each other
one, plus the share of passages whose label never changed and the ones that did.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from typing import Any

from evidex.harness.ports import StorePort
from evidex.harness.runner import HarnessSettings
from evidex.jobs import sync_of
from evidex.jobs.tier import atier
from evidex.judging import Judge
from evidex.types import DEFAULT_TIERS, Passage, TierScheme

__all__ = ["atier_consistency", "tier_consistency"]

QueryPassages = tuple[str, Sequence[Passage]]


async def atier_consistency(
    queries: Sequence[QueryPassages],
    judge: Judge | str,
    *,
    store: StorePort | str | None = None,
    runs: int = 3,
    batch_sizes: Sequence[int] = (10, 5, 7),
    seed: int = 0,
    scheme: TierScheme = DEFAULT_TIERS,
    settings: HarnessSettings | None = None,
) -> dict[str, Any]:
    """Run ``runs`` times: first in the given order in batches of ``batch_sizes[0]``, then
    shuffled (seeded) in batches of the next sizes. Returns per-run kappas against the first
    run (``nan`` when undefined: a single label), their minimum and mean, the share of
    passages labelled the same in every run, and the passages that changed."""
    from evidex.evaluate.metrics import cohen_kappa

    if runs < 2:
        raise ValueError("a consistency check needs at least two runs")
    uncached = dataclasses.replace(settings or HarnessSettings.from_config(), use_cache=False)
    plan = []
    labels: list[dict[tuple[str, str], str]] = []
    for r in range(runs):
        size = batch_sizes[r % len(batch_sizes)]
        plan.append({"run": r, "shuffled": r > 0, "batch_size": size})
        found: dict[tuple[str, str], str] = {}
        for query, passages in queries:
            order = list(passages)
            if r > 0:
                random.Random(seed * 1000 + r).shuffle(order)
            result = await atier(
                query,
                order,
                judge=judge,
                store=store,
                tiers=scheme,
                batch_size=size,
                settings=uncached,
            )
            for a in result.classifications:
                found[(query, a.passage_id)] = a.tier
        labels.append(found)

    keys = sorted(labels[0])
    first = [labels[0][k] for k in keys]
    kappas = [cohen_kappa(first, [run[k] for k in keys], scheme.names) for run in labels[1:]]
    defined = [k for k in kappas if not math.isnan(k)]
    changed = [k for k in keys if len({run[k] for run in labels}) > 1]
    return {
        "runs": plan,
        "items": len(keys),
        "kappa": kappas,
        "kappa_min": min(defined) if defined else math.nan,
        "kappa_mean": sum(defined) / len(defined) if defined else math.nan,
        "agreement": 1 - len(changed) / len(keys) if keys else math.nan,
        "unstable": [
            {"query": q, "passage_id": pid, "labels": [run[(q, pid)] for run in labels]}
            for q, pid in changed[:20]
        ],
    }


tier_consistency = sync_of(
    atier_consistency,
    "Re-run tier over ``queries`` shuffled and re-split; see :func:`atier_consistency`.",
)
