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
estimate by query (fit on one half of the queries, measure on the other, both ways, whole
queries on each side, with 95% bootstrap intervals over the held-out queries) is the figure
reported: the in-sample one flatters the fit. Two rules are measured that way, the two-sided
band and a band open above (the cheap stage settles only the low end, never the upper grades,
where out of set it disagrees most), and the one with the better out-of-set kappa among those
that keep the budget (or target) out of set is fitted on every query (:data:`RULES`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Container, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from evidex.evaluate import metrics as m
from evidex.evaluate._util import jsonable
from evidex.evaluate.calibration import fit_band, scores_of
from evidex.evaluate.cascade_frontier import query_split
from evidex.evaluate.golden import TierGolden, read_jsonl
from evidex.judges.cascade import Band, CascadeJudge

if TYPE_CHECKING:
    from evidex.evaluate._calibration_run import GoldenRun

__all__ = ["BAND_FILE", "acalibrate_cascade"]

BAND_FILE = "cascade_band.json"
RESAMPLES = 200

H = TypeVar("H", bound=Hashable)


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
    args = (ordered, scores, cheap, expensive, gold, names, target, budget, run.options.seed)
    measured = {rule: _two_fold(*args, open_above=above) for rule, above in RULES.items()}
    chosen = max(measured, key=lambda rule: _rank(measured[rule], budget, target))
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
            open_above=RULES[chosen],
        )
    )
    fitted.update(measured[chosen])
    fitted["kappa_in_sample"] = fitted["kappa"]
    fitted["rules_out_of_set"] = {
        rule: {k: v for k, v in two.items() if k != "folds"} for rule, two in measured.items()
    }
    fitted["chosen_by"] = (
        "the better out-of-set kappa (fit on one half of the queries, measured on the other, "
        "both ways, pooled) among the rules that kept the budget or the target out of set"
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
        kappa=fitted["kappa_two_fold"],
        kappa_expensive=fitted["kappa_expensive"],
    )


def _rank(two: dict[str, Any], budget: float | None, target: float) -> tuple[bool, float]:
    """Out-of-set: first whether the rule kept its budget (or target), then its kappa."""
    out = two.get("out_of_set")
    if out is None:
        return (False, -math.inf)
    kept = (
        out["share_sent"] <= budget + 1e-9
        if budget is not None
        else out["kappa_minus_expensive"] >= -target
    )
    return (kept, float(out["kappa"]))


RULES = {"two-sided band": False, "low only (upper edge +inf)": True}
"""The candidate rules (name: ``fit_band``'s ``open_above``); each is measured out of set and
the one with the better out-of-set kappa is fitted on every query (ties keep the first)."""
INTERVAL_SAMPLES = 500


query_halves = query_split
"""The old name of :func:`~evidex.evaluate.cascade_frontier.query_split`, which the band's
two-fold estimate uses: the band and the frontier rule split the queries the same way."""


def two_folds(keys: Sequence[H], first: Container[H]) -> Iterator[tuple[list[int], list[int]]]:
    """``(train, test)`` item positions both ways round: items whose key is in ``first``, then
    the others; a direction with an empty side is skipped (nothing to fit on or to measure).
    Written once for the cut-point and the band fits, whose two-fold estimates both hold out
    whole queries this way."""
    for fold in (True, False):
        train = [i for i, k in enumerate(keys) if (k in first) == fold]
        test = [i for i, k in enumerate(keys) if (k in first) != fold]
        if train and test:
            yield train, test


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
    open_above: bool = False,
) -> dict[str, Any]:
    """Fit on one half of the queries, measure on the other, both ways round: each direction's
    band, kappa, the expensive judge's kappa on the same pairs and the share sent, with 95%
    intervals over a bootstrap of the held-out queries; then both directions pooled."""
    groups = [r.group for r in records]
    first, _ = query_split(groups, seed)
    folds: list[dict[str, Any]] = []
    held: list[tuple[str, str, str, bool, str]] = []  # gold, cascade, expensive, sent, query
    for train, test in two_folds(groups, first):
        try:
            band = fit_band(
                [scores[i] for i in train],
                [cheap[i] for i in train],
                [expensive[i] for i in train],
                [gold[i] for i in train],
                len(names),
                target=target,
                budget=budget,
                groups=[groups[i] for i in train],
                resamples=RESAMPLES,
                seed=seed,
                open_above=open_above,
            )
        except ValueError:
            continue
        rows = []
        for i in test:
            inside = band["low"] <= scores[i] < band["high"]
            label = names[expensive[i] if inside else cheap[i]]
            rows.append((names[gold[i]], label, names[expensive[i]], inside, groups[i]))
        held += rows
        folds.append(
            {
                "fit_queries": sorted({groups[i] for i in train}),
                "measured_queries": sorted({groups[i] for i in test}),
                "low": band["low"],
                "high": band["high"],
                **_measured(rows, names, seed),
            }
        )
    if not held:
        return {"kappa_two_fold": math.nan, "share_sent_two_fold": math.nan, "folds": []}
    pooled = _measured(held, names, seed)
    return {
        "kappa_two_fold": pooled["kappa"],
        "share_sent_two_fold": pooled["share_sent"],
        "out_of_set": pooled,
        "folds": folds,
    }


def _measured(
    rows: Sequence[tuple[str, str, str, bool, str]], names: Sequence[str], seed: int
) -> dict[str, Any]:
    """Kappa of the cascade and of the expensive judge alone on ``rows``, the share sent, and
    95% intervals (the cascade's kappa, and its difference to the expensive judge's) over a
    bootstrap of the queries."""
    by_query: dict[str, list[tuple[str, str, str, bool, str]]] = {}
    for row in rows:
        by_query.setdefault(row[4], []).append(row)
    units = list(by_query.values())

    def kappa(picked: Sequence[list[tuple[str, str, str, bool, str]]], col: int = 1) -> float:
        flat = [r for unit in picked for r in unit]
        pred = [r[2] if col == 2 else r[1] for r in flat]
        return m.cohen_kappa([r[0] for r in flat], pred, list(names))

    def delta(picked: Sequence[list[tuple[str, str, str, bool, str]]]) -> float:
        return kappa(picked) - kappa(picked, 2)

    k = m.bootstrap_ci(units, kappa, samples=INTERVAL_SAMPLES, seed=seed)
    d = m.bootstrap_ci(units, delta, samples=INTERVAL_SAMPLES, seed=seed)
    return {
        "kappa": k.value,
        "kappa_interval": [k.low, k.high],
        "kappa_expensive": kappa(units, 2),
        "kappa_minus_expensive": d.value,
        "kappa_minus_expensive_interval": [d.low, d.high],
        "share_sent": sum(r[3] for r in rows) / len(rows),
        "pairs": len(rows),
        "queries": len(units),
    }
