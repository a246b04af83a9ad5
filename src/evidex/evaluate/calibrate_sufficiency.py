"""``evidex calibrate sufficiency``: fit the policy's ``abstain_confidence``, measured out of set.

The judge runs over the golden set once (the ordinary resumable evaluation, report in the
output directory); the fit then re-decides its verdicts, so trying a threshold costs no call.
An insufficient verdict at or above ``abstain_confidence`` abstains, below it a person decides
(:func:`evidex.jobs.sufficiency.decide`). Abstaining wrongly on an answerable question is the
harm, so the fit is constrained by it: the lowest threshold (the most abstentions, hence the
fewest escalations) whose share of answerable questions abstained on is at most ``target``;
among thresholds that abstain on as many unanswerable questions, the highest. When no
threshold meets the target, the one with the fewest wrong abstentions, with a warning.

A threshold fitted on a set flatters that set, so the figures to quote are out of set: the
queries are split into ``folds`` groups (whole queries: records with the same question stay
together, :attr:`~evidex.evaluate.golden.SufficiencyGolden.group`), the threshold is fitted on
the other groups and applied to each in turn, and the pooled held-out decisions are measured.
The threshold to use is the one fitted on every query; ``calibration.json`` keeps both, with
the judge id, model version and prompt version the staleness check compares.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidex.errors import ConfigError
from evidex.evaluate._calibration_run import GoldenRun
from evidex.evaluate._util import align_rows
from evidex.evaluate.calibration import calibration_record
from evidex.evaluate.golden import SufficiencyGolden, read_jsonl
from evidex.evaluate.plots import fmt_value
from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.sufficiency import decision_figures, decision_of, policy_of, risk_of
from evidex.harness.ports import StorePort
from evidex.jobs import sync_of
from evidex.jobs.sufficiency import SufficiencyPolicy
from evidex.judging import Judge
from evidex.types import RiskLevel

__all__ = [
    "acalibrate_sufficiency",
    "calibrate_sufficiency",
    "fit_abstain_confidence",
    "out_of_set",
]

JOB = "sufficiency"


def _decisions(
    rows: Sequence[Mapping[str, Any]], risk: RiskLevel, policy: SufficiencyPolicy, threshold: float
) -> list[str]:
    at = policy.model_copy(update={"abstain_confidence": threshold})
    return [decision_of(row, risk, at) for row in rows]


def fit_abstain_confidence(
    gold: Sequence[bool],
    rows: Sequence[Mapping[str, Any]],
    *,
    risk: RiskLevel = RiskLevel.LOW,
    policy: SufficiencyPolicy | None = None,
    target: float = 0.02,
) -> dict[str, Any]:
    """The ``abstain_confidence`` for these verdicts (``rows``: prediction rows, ``gold``:
    whether each question's passages suffice), as the module docstring says: ``threshold``,
    whether it meets ``target`` (``feasible``) and the decision figures it gives here."""
    if len(gold) != len(rows) or not rows:
        raise ValueError("gold labels and rows must be non-empty and of equal length")
    policy = policy or SufficiencyPolicy()
    candidates = sorted(
        {
            float(row["confidence"])
            for row in rows
            if row.get("sufficient") is False
            and row.get("source") != "fallback"
            and float(row["confidence"]) >= policy.escalate_below
        }
        | {1.0}
    )
    tried = []
    for threshold in candidates:
        decisions = _decisions(rows, risk, policy, threshold)
        figures = decision_figures(gold, decisions)
        wrong = sum(g and d == "abstain" for g, d in zip(gold, decisions, strict=True))
        right = sum(not g and d == "abstain" for g, d in zip(gold, decisions, strict=True))
        rate = figures["false_abstention_rate"]
        feasible = math.isnan(rate) or rate <= target + 1e-12
        # feasible first, then the most right abstentions (or, infeasible, the fewest wrong
        # ones), then the highest threshold
        tried.append(((feasible, right if feasible else -wrong, threshold), figures))
    (feasible, _, threshold), figures = max(tried, key=lambda t: t[0])
    return {"threshold": threshold, "feasible": feasible, "figures": figures}


def out_of_set(
    gold: Sequence[bool],
    rows: Sequence[Mapping[str, Any]],
    groups: Sequence[str],
    *,
    folds: int = 5,
    seed: int = 0,
    risk: RiskLevel = RiskLevel.LOW,
    policy: SufficiencyPolicy | None = None,
    target: float = 0.02,
) -> dict[str, Any]:
    """The decision figures of thresholds fitted on other queries: ``groups`` names each
    row's query; the queries are dealt into ``folds`` (at most one per query) in a seeded
    order, each fold decided with the threshold fitted on the others, and the held-out
    decisions pooled. Fewer than two queries: no figure (``nan``)."""
    names = list(dict.fromkeys(groups))
    k = min(folds, len(names))
    if k < 2:
        shares = decision_figures(gold, ["answer"] * len(gold))
        return {"folds": k, "thresholds": [], "figures": {key: math.nan for key in shares}}
    order = np.random.default_rng(seed).permutation(len(names)).tolist()
    fold_of = {names[i]: position % k for position, i in enumerate(order)}
    decided: list[str] = [""] * len(rows)
    thresholds = []
    for fold in range(k):
        train = [i for i, g in enumerate(groups) if fold_of[g] != fold]
        test = [i for i, g in enumerate(groups) if fold_of[g] == fold]
        fit = fit_abstain_confidence(
            [gold[i] for i in train],
            [rows[i] for i in train],
            risk=risk,
            policy=policy,
            target=target,
        )
        thresholds.append(fit["threshold"])
        held = _decisions(
            [rows[i] for i in test], risk, policy or SufficiencyPolicy(), fit["threshold"]
        )
        for i, decision in zip(test, held, strict=True):
            decided[i] = decision
    return {"folds": k, "thresholds": thresholds, "figures": decision_figures(gold, decided)}


async def acalibrate_sufficiency(
    golden: str | Path,
    *,
    judge: Judge | str | None,
    judge_options: Mapping[str, Any] | None = None,
    store: StorePort | str | None = None,
    out_dir: str | Path = "reports/calibration-sufficiency",
    sample: int | None = None,
    options: EvalOptions | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    target: float = 0.02,
    budget: float | None = None,
    folds: int = 5,
) -> dict[str, Any]:
    """Evaluate ``judge`` on the golden set (report in ``out_dir``), fit ``abstain_confidence``
    so that at most ``target`` of the answerable questions are abstained on, measure it out of
    set (``folds``-fold by query), and write ``calibration.json``. Returns the record;
    ``record["summary"]`` is what ``evidex calibrate`` prints."""
    if budget is not None:
        raise ConfigError(
            "--budget is for cascade judges; for sufficiency, --target is the share of "
            "answerable questions that may be abstained on"
        )
    if not 0.0 <= target < 1.0:
        raise ConfigError(f"target must be from 0 up to 1, got {target}")
    options = options or EvalOptions()
    out = Path(out_dir)
    golden_run = GoldenRun(golden, store, out, sample, options, job=JOB)
    report = await golden_run.evaluate(judge, judge_options=judge_options, on_progress=on_progress)
    typed: list[SufficiencyGolden] = golden_run.records()
    rows = align_rows(
        typed,
        [row for _, row in read_jsonl(out / "predictions.jsonl")],
        lambda record: [record.id],
        lambda row: [str(row.get("id"))],
        "question",
    )
    gold = [r.sufficient for r in typed]
    risk, policy = risk_of(options), policy_of(options)
    fit = fit_abstain_confidence(gold, rows, risk=risk, policy=policy, target=target)
    held = out_of_set(
        gold,
        rows,
        [r.group for r in typed],
        folds=folds,
        seed=options.seed,
        risk=risk,
        policy=policy,
        target=target,
    )
    warnings = list(report.get("warnings", []))
    if not fit["feasible"]:
        fewest = fmt_value(fit["figures"]["false_abstention_rate"])
        warnings.append(
            f"no abstain_confidence keeps the answerable questions abstained on at or under "
            f"{target:.1%}; the one with the fewest ({fewest}) is fitted"
        )
    if risk is RiskLevel.HIGH:
        warnings.append("at high risk every insufficient verdict escalates: the threshold is moot")
    if held["folds"] < 2:
        warnings.append("fewer than two queries: no out-of-set figure")
    fitted = {
        "abstain_confidence": fit["threshold"],
        "objective": f"the most abstentions with at most {target:.1%} of the answerable "
        "questions abstained on",
        "target": target,
        "feasible": fit["feasible"],
        "in_sample": fit["figures"],
        "out_of_set": {**held["figures"], "folds": held["folds"], "by": "query"},
        "fold_thresholds": held["thresholds"],
        "policy": {**policy.model_dump(), "abstain_confidence": fit["threshold"]},
        "risk": risk.value,
    }
    run = report["run"]
    record = calibration_record(
        job=JOB,
        judge_id=run["judge_id"],
        model_version=run["model_version"],
        prompt_version=run["prompt_version"],
        golden=str(golden),
        report=report,
        fitted=fitted,
    )
    for key in ("tiers", "kappa", "kappa_linear", "boundaries"):
        record.pop(key, None)
    record["metrics"] = dict(report["metrics"])
    record["warnings"] = warnings
    record["summary"] = _summary(record)
    return golden_run.save(record)


calibrate_sufficiency = sync_of(
    acalibrate_sufficiency,
    "Calibrate the sufficiency policy's threshold; see :func:`acalibrate_sufficiency`.",
)


def _figures(shares: Mapping[str, Any]) -> str:
    return (
        f"abstained {fmt_value(shares['abstention_rate'])}, answerable abstained "
        f"{fmt_value(shares['false_abstention_rate'])}, unanswerable abstained "
        f"{fmt_value(shares['insufficient_abstained_rate'])}, escalated "
        f"{fmt_value(shares['escalation_rate'])}"
    )


def _summary(record: Mapping[str, Any]) -> list[str]:
    fitted, metrics = record["fitted"], record["metrics"]
    threshold = fitted["abstain_confidence"]
    held = fitted["out_of_set"]
    return [
        f"F1 of insufficient {fmt_value(metrics['f1(label=insufficient)'])}, accuracy "
        f"{fmt_value(metrics['accuracy'])} ({record['judge_id']}, {record['items']} questions)",
        f"fitted abstain_confidence {threshold:g}: {fitted['objective']}",
        f"out of set ({held['folds']}-fold by query, each fold decided by the threshold fitted "
        f"on the others): {_figures(held)}",
        f"in sample (flatters): {_figures(fitted['in_sample'])}",
        f"to decide with it: --abstain-confidence {threshold:g} (evidex sufficiency, evidex bulk "
        f"sufficiency), SufficiencyPolicy(abstain_confidence={threshold:g}) in Python",
    ]
