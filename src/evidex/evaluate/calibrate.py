"""``evidex calibrate``: measure a judge on a golden set and fit what can be fitted.

Runs the evaluation (the same resumable run as ``evidex eval``, report in the output
directory), then, for a judge that can score (``score(query, texts) -> list[float]``, such as
``local:minilm``), fits the tier cut points that maximise kappa, and writes
``calibration.json`` with the judge id, model version and prompt version (see
:mod:`evidex.evaluate.calibration` for the arithmetic and the staleness check).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidex.evaluate import metrics as m
from evidex.evaluate._calibration_run import GoldenRun
from evidex.evaluate.calibrate_cascade import acalibrate_cascade, two_folds
from evidex.evaluate.calibration import fit_thresholds, scores_of, tier_of_score
from evidex.evaluate.golden import TierGolden
from evidex.evaluate.registry import EvalOptions
from evidex.harness.ports import StorePort
from evidex.jobs import resolve_judge, sync_of
from evidex.judges.cascade import CascadeJudge
from evidex.judging import Judge

__all__ = ["acalibrate_tier", "calibrate_tier"]


async def acalibrate_tier(
    golden: str | Path,
    *,
    judge: Judge | str | None,
    judge_options: Mapping[str, Any] | None = None,
    store: StorePort | str | None = None,
    out_dir: str | Path = "reports/calibration-tier",
    sample: int | None = None,
    options: EvalOptions | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    target: float = 0.02,
    budget: float | None = None,
) -> dict[str, Any]:
    """Evaluate ``judge`` on the golden set (report in ``out_dir``), then fit cut points when it
    can score, and write ``calibration.json`` (plus ``thresholds.json`` for a judge that reads
    its cut points from such a file). Returns the calibration record.

    The fit is in-sample, so it flatters; the record also gives a two-fold estimate by query
    (fit on one half of the queries, measure on the other, and the other way round).

    A cascade judge (``cascade:CHEAP,EXPENSIVE``) has its uncertain band fitted instead: the
    fewest items sent on with kappa within ``target`` of the expensive judge alone, or with
    ``budget`` the best kappa sending at most that share (see
    :mod:`evidex.evaluate.calibrate_cascade`).
    """
    out = Path(out_dir)
    run = GoldenRun(golden, store, out, sample, options or EvalOptions())
    the_judge = resolve_judge(judge, "tier", **dict(judge_options or {}))
    if isinstance(the_judge, CascadeJudge):
        out.mkdir(parents=True, exist_ok=True)
        return await acalibrate_cascade(
            run, the_judge, target=target, budget=budget, on_progress=on_progress
        )
    scorable = callable(getattr(the_judge, "score", None))
    records = run.records()
    # One progress count over both phases: the evaluation's batches, then (for a judge that
    # scores) one step per query scored for the fit, which on a CPU takes as long again.
    fit_steps = len({r.group for r in records}) if scorable else 0
    seen = {"of": 0}

    def eval_progress(done: int, of: int) -> None:
        seen["of"] = of
        if on_progress is not None:
            on_progress(done, of + fit_steps)

    report = await run.evaluate(the_judge, on_progress=eval_progress)
    fitted = None
    warnings: list[str] = []
    if scorable:
        base = seen["of"] or int(report["run"].get("groups") or 0)

        def fit_progress(done: int) -> None:
            if on_progress is not None:
                on_progress(base + done, base + fit_steps)

        fitted = await _fit_on(
            the_judge, records, list(report["tiers"]), run.options.seed, fit_progress
        )
        warnings = fitted.pop("warnings")
        thresholds = getattr(the_judge, "thresholds", None)
        weight = getattr(thresholds, "sentence_weight", None)
        if weight is not None:
            (out / "thresholds.json").write_text(
                json.dumps(
                    {
                        "sentence_weight": weight,
                        "cut_points": fitted["cut_points"],
                        "tiers": report["tiers"],
                        "fit": {
                            "golden": str(golden),
                            "items": len(records),
                            "kappa_in_sample": fitted["kappa"],
                            "kappa_two_fold": fitted["kappa_two_fold"],
                            "model_version": the_judge.model_version,
                        },
                    },
                    indent=2,
                )
                + "\n",
                encoding="utf-8",
            )
            fitted["thresholds_file"] = str(out / "thresholds.json")
        as_option = getattr(the_judge, "cut_points_option", None)
        if callable(as_option):  # a judge that takes its cut points as an option
            fitted["judge_option"] = as_option(fitted["cut_points"])
    return run.write(the_judge, report, fitted, warnings)


calibrate_tier = sync_of(acalibrate_tier, "Calibrate a tier judge; see :func:`acalibrate_tier`.")


async def _fit_on(
    judge: Any,
    records: Sequence[TierGolden],
    names: list[str],
    seed: int,
    on_query: Callable[[int], None] = lambda done: None,
) -> dict[str, Any]:
    by_query: dict[str, list[Any]] = {}
    for r in records:
        by_query.setdefault(r.group, []).append(r)
    scores: list[float] = []
    gold: list[int] = []
    query_of: list[int] = []
    for qi, members in enumerate(by_query.values()):
        scores += await scores_of(judge, members[0].query, [r.text for r in members])
        gold += [names.index(r.tier) for r in members]
        query_of += [qi] * len(members)
        on_query(qi + 1)
    cuts, kappa = fit_thresholds(scores, gold, len(names))
    predicted = [names[tier_of_score(s, cuts)] for s in scores]
    golden = [names[g] for g in gold]
    rng = np.random.default_rng(seed)
    half = set(rng.permutation(len(by_query))[: len(by_query) // 2].tolist())
    held_gold: list[str] = []
    held_pred: list[str] = []
    for train, test in two_folds(query_of, half):
        try:
            fold_cuts, _ = fit_thresholds(
                [scores[i] for i in train], [gold[i] for i in train], len(names)
            )
        except ValueError:
            continue
        held_gold += [golden[i] for i in test]
        held_pred += [names[tier_of_score(scores[i], fold_cuts)] for i in test]
    return {
        "cut_points": cuts,
        "kappa": kappa,
        "kappa_linear": m.cohen_kappa(golden, predicted, names, "linear"),
        "kappa_two_fold": m.cohen_kappa(held_gold, held_pred, names) if held_gold else math.nan,
        "objective": "Cohen's kappa (unweighted)",
        "warnings": narrow_bands(cuts, scores, names),
    }


def narrow_bands(
    cut_points: Sequence[float], scores: Sequence[float], names: Sequence[str]
) -> list[str]:
    """A warning for each tier whose fitted band (between two cut points) is degenerate:
    narrower than 2% of the observed score range, or holding no item. Such a band is what the
    fit found to squeeze a few golden items into a tier; new scores land in it by chance."""
    if not scores or len(cut_points) < 2:
        return []
    low, high = min(scores), max(scores)
    spread = high - low
    found = []
    for i in range(1, len(cut_points)):
        top, bottom = cut_points[i - 1], cut_points[i]
        width = top - bottom
        held = sum(1 for s in scores if bottom <= s < top)
        if held and spread > 0 and width >= 0.02 * spread:
            continue
        share = width / spread if spread > 0 else 0.0
        found.append(
            f"the {names[i]} band is {width:.4g} wide ({bottom:.4g} to {top:.4g}, {share:.1%} "
            f"of the scores' range {low:.4g}-{high:.4g}) and holds {held} of {len(scores)} "
            f"item(s): the judge's scores barely set it apart, so a new passage lands in it "
            f"almost by chance; label more items near it or merge it with a neighbour"
        )
    return found
