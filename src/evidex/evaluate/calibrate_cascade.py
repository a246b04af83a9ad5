"""``evidex calibrate tier --judge cascade:CHEAP,EXPENSIVE``: fit the cascade's uncertain band.

The expensive judge alone is evaluated on the golden set (the ordinary resumable evaluation,
report in ``OUT/expensive``), the cheap judge scores every golden pair, and
:func:`~evidex.evaluate.calibration.fit_band` picks the band that sends the fewest pairs to the
expensive judge while the cascade's kappa stays within ``target`` of the expensive judge's,
with a safety margin: the target must hold at the 5th percentile of a bootstrap over the
golden set's queries (:data:`RESAMPLES` resamples), because the band that just meets it on
the fitting queries falls short on others (measured on TREC DL 2019 in ``docs/benchmarks.md``).
With a ``budget`` instead (the share of pairs the expensive judge may see, for a user who
counts calls rather than kappa), it picks the band with the best kappa that sends at most that
share at the 95th percentile of the same bootstrap.
The band is written as ``cascade_band.json`` (with both stages' ids and model versions, which
the cascade judge checks when it reads the file: a band fitted with other models is stale) and
the record as ``calibration.json``, the same staleness check as every calibration. A two-fold
estimate by query (fit on one half of the queries, measure on the other, both ways) says how
much of the in-sample figure is the fit flattering itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evidex.evaluate import metrics as m
from evidex.evaluate._util import jsonable
from evidex.evaluate.calibration import fit_band, scores_of
from evidex.evaluate.golden import TierGolden, read_jsonl
from evidex.judges.cascade import Band, CascadeJudge

if TYPE_CHECKING:
    from evidex.evaluate._calibration_run import GoldenRun

__all__ = ["BAND_FILE", "acalibrate_cascade"]

BAND_FILE = "cascade_band.json"
RESAMPLES = 200


async def acalibrate_cascade(
    run: GoldenRun,
    judge: CascadeJudge,
    *,
    target: float,
    on_progress: Callable[[int, int], None] | None,
    budget: float | None = None,
) -> dict[str, Any]:
    """Fit and record the band of ``judge`` on the golden set of ``run`` (see the module
    docstring); returns the record."""
    out = run.out
    report = await run.evaluate(judge.expensive, out=out / "expensive", on_progress=on_progress)
    records = run.records()
    names = list(report["tiers"])
    predicted = {
        f"{row.get('query_id') or row['query']}\x1f{row['passage_id']}": row["tier"]
        for _, row in read_jsonl(out / "expensive" / "predictions.jsonl")
    }
    by_query: dict[str, list[TierGolden]] = {}
    for r in records:
        by_query.setdefault(r.group, []).append(r)
    scores: list[float] = []
    ordered: list[TierGolden] = []
    for members in by_query.values():
        scores += await scores_of(judge.cheap, members[0].query, [r.text for r in members])
        ordered += members
    gold = [names.index(r.tier) for r in ordered]
    cheap = [names.index(judge.cheap_tier(s, names)) for s in scores]
    expensive = [names.index(predicted.get(r.key, names[-1])) for r in ordered]
    groups = [r.group for r in ordered]
    fitted: dict[str, Any] = dict(
        fit_band(
            scores,
            cheap,
            expensive,
            gold,
            len(names),
            target=target,
            budget=budget,
            groups=groups,
            resamples=RESAMPLES,
            seed=run.options.seed,
        )
    )
    fitted.update(
        _two_fold(ordered, scores, cheap, expensive, gold, names, target, budget, run.options.seed)
    )
    band = Band(
        low=fitted["low"],
        high=fitted["high"],
        cheap=judge.cheap.judge_id,
        cheap_version=judge.cheap.model_version,
        expensive=judge.expensive.judge_id,
        expensive_version=judge.expensive.model_version,
        fit={"golden": str(run.golden), "items": len(ordered), **fitted},
    )
    band_file = out / BAND_FILE
    band_file.write_text(json.dumps(jsonable(band.to_json()), indent=2) + "\n", encoding="utf-8")
    fitted["band_file"] = str(band_file)
    fitted["objective"] = (
        f"fewest items sent with kappa >= expensive alone - {target:g} at the 5th percentile "
        f"of {RESAMPLES} bootstrap resamples of the queries"
        if budget is None
        else f"best kappa with at most {budget:.0%} of the items sent at the 95th percentile "
        f"of {RESAMPLES} bootstrap resamples of the queries"
    )
    return run.write(
        judge,
        report,
        fitted,
        list(report.get("warnings", [])),
        kappa=fitted["kappa"],
        kappa_expensive=fitted["kappa_expensive"],
    )


def _two_fold(
    records: Sequence[TierGolden],
    scores: Sequence[float],
    cheap: Sequence[int],
    expensive: Sequence[int],
    gold: Sequence[int],
    names: Sequence[str],
    target: float,
    budget: float | None,
    seed: int,
) -> dict[str, float]:
    """Fit on half of the queries, measure on the other half, both ways round."""
    groups = sorted({r.group for r in records})
    rng = np.random.default_rng(seed)
    half = {groups[i] for i in rng.permutation(len(groups))[: len(groups) // 2].tolist()}
    held_gold: list[str] = []
    held_pred: list[str] = []
    sent = 0
    for fold in (True, False):
        train = [i for i, r in enumerate(records) if (r.group in half) == fold]
        test = [i for i, r in enumerate(records) if (r.group in half) != fold]
        if not train or not test:
            continue
        try:
            band = fit_band(
                [scores[i] for i in train],
                [cheap[i] for i in train],
                [expensive[i] for i in train],
                [gold[i] for i in train],
                len(names),
                target=target,
                budget=budget,
                groups=[records[i].group for i in train],
                resamples=RESAMPLES,
                seed=seed,
            )
        except ValueError:
            continue
        for i in test:
            inside = band["low"] <= scores[i] < band["high"]
            sent += inside
            held_gold.append(names[gold[i]])
            held_pred.append(names[expensive[i] if inside else cheap[i]])
    if not held_gold:
        return {"kappa_two_fold": math.nan, "share_sent_two_fold": math.nan}
    return {
        "kappa_two_fold": m.cohen_kappa(held_gold, held_pred, list(names)),
        "share_sent_two_fold": sent / len(held_gold),
    }
