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
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.evaluate import metrics as m
from evidex.evaluate._util import read_json_object

__all__ = [
    "CALIBRATION_FILE",
    "calibration_record",
    "check_calibration",
    "fit_band",
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


def fit_band(
    scores: Sequence[float],
    cheap: Sequence[int],
    expensive: Sequence[int],
    gold: Sequence[int],
    n_labels: int,
    *,
    target: float = 0.02,
    budget: float | None = None,
    candidates: int = 100,
    groups: Sequence[str] | None = None,
    resamples: int = 0,
    seed: int = 0,
    open_above: bool = False,
) -> dict[str, Any]:
    """The cascade band ``[low, high)``: by default the one that sends the fewest items to the
    expensive judge while the cascade's kappa against ``gold`` stays within ``target`` of the
    expensive judge's own; with ``budget``, the one with the highest kappa that sends at most
    that share of the items.

    ``cheap`` and ``expensive`` are each stage's label index per item (0 = most relevant);
    an item scored inside the band takes the expensive label, the others the cheap one. The
    bounds are tried at ``candidates`` score quantiles and at ±infinity (so sending every item,
    which meets any target of at least 0, and sending none, which meets any budget, are always
    choices). Ties keep, for a target, the bound furthest inside it among the bands sending
    the fewest; for a budget, the fewest sent among the bands of the best kappa; then the
    earlier choice: the fit is deterministic.

    With ``resamples`` and ``groups`` (each item's query), the rule must hold with a safety
    margin over ``resamples`` bootstrap resamples of the queries. For a target: at the 5th
    percentile of the band's kappa minus the expensive judge's on the same resample. The point
    estimate picks the band that just meets the target on the fitting set, which on new
    queries falls short (on TREC DL 2019, fitted on one half of the queries: 0.277 against the
    LLM's 0.324 on the other half); the margin buys a wider band that holds there. For a
    budget: at the 95th percentile of the share sent, because queries differ in how many of
    their pairs score in the band (on TREC DL 2019 a band fitted to send 45% of one half's
    pairs sent 54% of the other's).

    With ``open_above`` the upper edge is fixed at +infinity: the cheap stage settles only
    the low end, never the upper grades (out of set, the encoder's confident highs are where
    it disagrees with the expensive judge most; see ``cascade_out_of_set`` in
    ``docs/benchmarks.md``), and only ``low`` is fitted.
    """
    values = np.asarray(scores, dtype=float)
    if not len(values) or not len(values) == len(cheap) == len(expensive) == len(gold):
        raise ValueError("scores and the three label lists must be non-empty and equally long")
    if resamples and (groups is None or len(groups) != len(values)):
        raise ValueError("a bootstrap margin needs the query (group) of every item")
    if budget is not None and not 0.0 < budget <= 1.0:
        raise ValueError(f"budget must be a share of the items in (0, 1], got {budget}")
    grid = np.quantile(values, np.linspace(0, 1, candidates + 1), method="lower")
    lows = np.unique(np.concatenate([[-np.inf], grid]))
    highs = np.array([np.inf]) if open_above else np.unique(np.concatenate([lows[1:], [np.inf]]))
    cheap_a, exp_a, gold_a = (np.asarray(x, dtype=int) for x in (cheap, expensive, gold))
    n = n_labels
    weights = _bootstrap_weights(groups, resamples, seed) if resamples and groups else None
    best: tuple[float, float, float, float, float, float] | None = None
    alone = float(_kappas(_confusions(gold_a[None, :], exp_a[None, :], n), None)[0])
    alone_b = None if weights is None else _resampled(weights, gold_a, exp_a[None, :], n)[0]
    for low in lows:
        ups = highs[highs >= low]
        inside = (values[None, :] >= low) & (values[None, :] < ups[:, None])
        predicted = np.where(inside, exp_a[None, :], cheap_a[None, :])
        kappas = _kappas(_confusions(gold_a[None, :], predicted, n), None)
        shares = inside.mean(axis=1)
        if budget is not None:
            bounds = shares if weights is None else _resampled_shares(weights, inside)
            feasible = bounds <= budget + 1e-12
            keys = zip(-kappas, shares, strict=True)  # the best kappa, then the fewest sent
        else:
            if weights is None or alone_b is None:
                bounds = kappas - alone
            else:
                with np.errstate(invalid="ignore"):
                    bounds = np.nanquantile(
                        _resampled(weights, gold_a, predicted, n) - alone_b, 0.05, axis=1
                    )
            feasible = bounds >= -target - 1e-12
            keys = zip(shares, -bounds, strict=True)  # the fewest sent, then the safest
        for ok, key, raw, kappa, high in zip(feasible, keys, bounds, kappas, ups, strict=True):
            bound = float(raw)
            if not ok or np.isnan(bound) or np.isnan(kappa):
                continue
            first, second = key
            choice = (float(first), float(second), float(low), float(high), float(kappa), bound)
            if best is None or choice[:2] < best[:2]:
                best = choice
    if best is None:  # only when the expensive judge's own kappa is undefined
        raise ValueError("kappa is undefined for every band (a single label?)")
    low, high, kappa, bound = best[2:]
    fitted: dict[str, Any] = {
        "low": low,
        "high": high,
        "kappa": kappa,
        "kappa_expensive": alone,
        "share_sent": float(np.mean((values >= low) & (values < high))),
    }
    fitted.update({"target": target} if budget is None else {"budget": budget})
    fitted["rule"] = "low only (upper edge +inf)" if open_above else "two-sided band"
    if weights is not None:
        fitted["margin"] = (
            {
                "rule": "5th percentile of (band kappa - expensive kappa) over query resamples",
                "kappa_loss_bound": bound,
            }
            if budget is None
            else {
                "rule": "95th percentile of the share sent over query resamples",
                "share_bound": bound,
            }
        ) | {"resamples": resamples, "seed": seed}
    return fitted


def _bootstrap_weights(
    groups: Sequence[str], resamples: int, seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int_]]:
    """How many times each group is drawn in each resample (resamples × groups), and each
    item's group index."""
    names, index = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), size=(resamples, len(names)))
    counts = np.stack([np.bincount(row, minlength=len(names)) for row in draws]).astype(float)
    return counts, index.astype(int)


def _resampled(
    weights: tuple[npt.NDArray[np.float64], npt.NDArray[np.int_]],
    gold: npt.NDArray[np.int_],
    predicted: npt.NDArray[np.int_],
    n: int,
) -> npt.NDArray[np.float64]:
    """Kappa of each row of ``predicted`` on each resample (rows × resamples): each group's
    confusion counts once, then the resamples as weighted sums of them."""
    counts, group = weights
    rows, cells = predicted.shape[0], n * n
    flat = (np.arange(rows)[:, None] * counts.shape[1] + group[None, :]) * cells
    flat = (flat + gold[None, :] * n + predicted).ravel()
    per_group = np.bincount(flat, minlength=rows * counts.shape[1] * cells).astype(float)
    per_group = per_group.reshape(rows, counts.shape[1], cells)
    confusion = np.einsum("bq,rqk->rbk", counts, per_group, optimize=True)
    return _kappas(confusion.reshape(rows * len(counts), n, n), None).reshape(rows, len(counts))


def _resampled_shares(
    weights: tuple[npt.NDArray[np.float64], npt.NDArray[np.int_]],
    inside: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """The 95th percentile, over the resamples, of the share each row of ``inside`` sends."""
    counts, group = weights
    per_group = np.zeros((inside.shape[0], counts.shape[1]))
    np.add.at(per_group.T, group, inside.T.astype(float))
    sizes = np.bincount(group, minlength=counts.shape[1]).astype(float)
    shares = (per_group @ counts.T) / (counts @ sizes)[None, :]
    out: npt.NDArray[np.float64] = np.percentile(shares, 95, axis=1)
    return out


def _confusions(
    gold: npt.NDArray[np.int_], predicted: npt.NDArray[np.int_], n: int
) -> npt.NDArray[np.float64]:
    """Confusion matrices (gold × predicted) of each row of ``predicted``."""
    rows = predicted.shape[0]
    flat = (np.arange(rows)[:, None] * n * n + gold * n + predicted).ravel()
    counts = np.bincount(flat, minlength=rows * n * n).reshape(rows, n, n)
    return counts.astype(float)


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
    record = read_json_object(path, "calibration file")
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
