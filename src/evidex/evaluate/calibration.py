"""Calibration of a judge against a golden set, and the staleness check of its record.

``evidex calibrate tier`` runs the judge over the golden set (through the same resumable
evaluation as ``evidex eval``), reports kappa and which adjacent tier boundaries cause the
disagreements, and, for a score-based judge (one with ``score(query, texts) -> list[float]``,
such as ``local:minilm``), fits the tier cut points that maximise kappa on those scores.

The calibration file (``calibration.json``) records the judge id, its model version and the
prompt version. The spec asks for recalibration after any prompt or model change, so
:func:`check_calibration` turns a mismatch into a warning that ``evidex eval`` prints and keeps
in its report. For a judge that reads its cut points from a thresholds file (``local:minilm``'s
``thresholds_path`` option), the fitted points are also written as ``thresholds.json`` in that
judge's format.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.errors import ConfigError
from evidex.evaluate import metrics as m
from evidex.evaluate._util import jsonable

__all__ = [
    "CALIBRATION_FILE",
    "acalibrate_tier",
    "calibrate_tier",
    "check_calibration",
    "fit_thresholds",
    "tier_of_score",
]

CALIBRATION_FILE = "calibration.json"
_MAX_COMBINATIONS = 50_000


def tier_of_score(score: float, cut_points: Sequence[float]) -> int:
    """Index of the tier a score falls in: the first cut point (descending) it reaches."""
    return next((i for i, c in enumerate(cut_points) if score >= c), len(cut_points))


def fit_thresholds(
    scores: Sequence[float],
    gold: Sequence[int],
    n_labels: int,
    *,
    weights: m.Weights = None,
    candidates: int = 64,
) -> tuple[list[float], float]:
    """Cut points (descending, one fewer than the labels) that maximise kappa.

    ``gold`` are label indices, 0 = most relevant; an item is given the first label whose cut
    point its score reaches (:func:`tier_of_score`). First every ordered choice among
    ``candidates`` score quantiles is tried (the grid halves until there are at most 50,000
    choices), then each cut point in turn moves to whichever observed score between its
    neighbours does best, until no move helps. Every choice is scored from cumulative counts,
    all at once, so a fit over thousands of items takes well under a second. Ties keep the
    earlier choice: the fit is deterministic.
    """
    if len(scores) != len(gold) or not scores:
        raise ValueError("scores and gold labels must be non-empty and of equal length")
    values = np.asarray(scores, dtype=float)
    uniq = np.unique(values)
    cuts_needed = n_labels - 1
    if len(uniq) < cuts_needed:
        raise ValueError("too few distinct scores to place the cut points")
    # position p (1..len(uniq)) stands for the cut point uniq[p - 1]
    bins = np.searchsorted(uniq, values, side="right")
    counts = np.zeros((len(uniq) + 1, n_labels), dtype=np.int64)
    np.add.at(counts, (bins, np.asarray(gold, dtype=int)), 1)
    cum = np.vstack([np.zeros((1, n_labels), dtype=np.int64), np.cumsum(counts, axis=0)])

    def kappas_of(combos: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        edges = np.hstack(
            [
                np.zeros((len(combos), 1), dtype=int),
                combos,
                np.full((len(combos), 1), len(uniq) + 1),
            ]
        )
        # segment s (lowest scores first) holds the items given label n_labels - 1 - s
        segments = cum[edges[:, 1:]] - cum[edges[:, :-1]]
        confusion = np.transpose(segments[:, ::-1, :], (0, 2, 1)).astype(float)
        return _kappas(confusion, weights)

    quantiles = np.quantile(values, np.linspace(0, 1, candidates + 2)[1:-1], method="lower")
    grid = np.unique(np.searchsorted(uniq, quantiles) + 1)
    while len(grid) > cuts_needed and math.comb(len(grid), cuts_needed) > _MAX_COMBINATIONS:
        grid = grid[::2]
    if len(grid) < cuts_needed:
        grid = np.arange(1, len(uniq) + 1)[-cuts_needed:]
    combos = np.array(list(itertools.combinations(grid.tolist(), cuts_needed)), dtype=np.int64)
    kappas = kappas_of(combos)
    if np.all(np.isnan(kappas)):
        raise ValueError("kappa is undefined for every choice of cut points (a single label?)")
    best, best_kappa = combos[int(np.nanargmax(kappas))].copy(), float(np.nanmax(kappas))
    improved = True
    while improved:
        improved = False
        for i in range(cuts_needed):
            low = best[i - 1] + 1 if i > 0 else 1
            high = best[i + 1] - 1 if i < cuts_needed - 1 else len(uniq)
            trial = np.repeat(best[None, :], high - low + 1, axis=0)
            trial[:, i] = np.arange(low, high + 1)
            found = kappas_of(trial)
            if np.all(np.isnan(found)):
                continue
            if float(np.nanmax(found)) > best_kappa + 1e-12:
                best, best_kappa = trial[int(np.nanargmax(found))].copy(), float(np.nanmax(found))
                improved = True
    return [float(uniq[p - 1]) for p in best[::-1]], best_kappa


def _kappas(confusion: npt.NDArray[np.float64], weights: m.Weights) -> npt.NDArray[np.float64]:
    """Kappa of each matrix in a stack (the same formula as :func:`metrics.kappa_from_matrix`)."""
    n = confusion.shape[-1]
    observed = confusion / confusion.sum(axis=(1, 2), keepdims=True)
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
    i, j = np.indices((n, n))
    w = {None: (i != j).astype(float), "linear": np.abs(i - j) / (n - 1)}.get(
        weights, ((i - j) / (n - 1)) ** 2
    )
    den = (w * expected).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        out: npt.NDArray[np.float64] = np.where(
            den > 0, 1 - (w * observed).sum(axis=(1, 2)) / den, np.nan
        )
    return out


def check_calibration(
    path: str | Path, judge_id: str, model_version: str, prompt_version: str
) -> list[str]:
    """Warnings when the calibration file was made with another judge, model or prompt."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the calibration file: {exc}") from exc
    if not isinstance(record, dict):
        raise ConfigError(f"{path}: a calibration file holds a JSON object")
    warnings = []
    for field, now in (
        ("judge_id", judge_id),
        ("model_version", model_version),
        ("prompt_version", prompt_version),
    ):
        then = record.get(field)
        if then != now:
            warnings.append(
                f"stale calibration {path}: it was made with {field.replace('_', ' ')} "
                f"{then!r}, this run uses {now!r}; recalibrate (evidex calibrate)"
            )
    return warnings


async def scores_of(judge: Any, query: str, texts: Sequence[str]) -> list[float]:
    """The judge's scores for ``texts`` (``score`` may be sync or async)."""
    result = judge.score(query, list(texts))
    if inspect.isawaitable(result):
        result = await result
    return [float(s) for s in result]


def calibration_record(
    *,
    job: str,
    judge_id: str,
    model_version: str,
    prompt_version: str,
    golden: str,
    report: Mapping[str, Any],
    fitted: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The content of ``calibration.json``."""
    return {
        "job": job,
        "judge_id": judge_id,
        "model_version": model_version,
        "prompt_version": prompt_version,
        "golden": golden,
        "items": report.get("run", {}).get("items"),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tiers": report.get("tiers"),
        "kappa": report["metrics"].get("kappa"),
        "kappa_linear": report["metrics"].get("kappa_linear"),
        "boundaries": report.get("boundaries"),
        "fitted": dict(fitted) if fitted else None,
    }


def calibrate_tier(
    golden: str | Path,
    *,
    judge: Any,
    judge_options: Mapping[str, Any] | None = None,
    store: Any = None,
    out_dir: str | Path = "reports/calibration-tier",
    sample: int | None = None,
    options: Any = None,
    on_progress: Any = None,
) -> dict[str, Any]:
    """Calibrate a tier judge; see :func:`acalibrate_tier`."""
    from evidex.jobs._common import run_sync

    return run_sync(
        acalibrate_tier(
            golden,
            judge=judge,
            judge_options=judge_options,
            store=store,
            out_dir=out_dir,
            sample=sample,
            options=options,
            on_progress=on_progress,
        )
    )


async def acalibrate_tier(
    golden: str | Path,
    *,
    judge: Any,
    judge_options: Mapping[str, Any] | None = None,
    store: Any = None,
    out_dir: str | Path = "reports/calibration-tier",
    sample: int | None = None,
    options: Any = None,
    on_progress: Any = None,
) -> dict[str, Any]:
    """Evaluate ``judge`` on the golden set (report in ``out_dir``), then fit cut points when it
    can score, and write ``calibration.json`` (plus ``thresholds.json`` for a judge that reads
    its cut points from such a file). Returns the calibration record.

    The fit is in-sample, so it flatters; the record also gives a two-fold estimate by query
    (fit on one half of the queries, measure on the other, and the other way round).
    """
    from evidex.evaluate.registry import EvalOptions
    from evidex.evaluate.run import aevaluate, load_records
    from evidex.jobs._common import resolve_judge

    options = options or EvalOptions()
    out = Path(out_dir)
    the_judge = resolve_judge(judge, "tier", **dict(judge_options or {}))
    report = await aevaluate(
        "tier",
        golden,
        judge=the_judge,
        store=store,
        out_dir=out,
        sample=sample,
        options=options,
        on_progress=on_progress,
    )
    fitted = None
    if callable(getattr(the_judge, "score", None)):
        _, records = load_records("tier", golden, options, sample=sample)
        fitted = await _fit_on(the_judge, records, list(report["tiers"]), options.seed)
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
    record = calibration_record(
        job="tier",
        judge_id=the_judge.judge_id,
        model_version=the_judge.model_version,
        prompt_version=report["run"]["prompt_version"],
        golden=str(golden),
        report=report,
        fitted=fitted,
    )
    (out / CALIBRATION_FILE).write_text(
        json.dumps(jsonable(record), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return record


async def _fit_on(
    judge: Any, records: Sequence[Any], names: list[str], seed: int
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
    cuts, kappa = fit_thresholds(scores, gold, len(names))
    predicted = [names[tier_of_score(s, cuts)] for s in scores]
    golden = [names[g] for g in gold]
    rng = np.random.default_rng(seed)
    half = set(rng.permutation(len(by_query))[: len(by_query) // 2].tolist())
    held_gold: list[str] = []
    held_pred: list[str] = []
    for fold in (True, False):
        train = [i for i, q in enumerate(query_of) if (q in half) == fold]
        test = [i for i, q in enumerate(query_of) if (q in half) != fold]
        if not train or not test:
            continue
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
    }
