"""Run against run: two evaluation reports of one job on one golden set, item by item.

A change of judge, prompt or options moves a report's figures; whether the move is more than
the noise of a small golden set is what a team needs to know before it ships the change. The
comparison pairs the two reports' items (the job's unit of evaluation, the report's ``unit``:
a query–passage pair, a query, an input, an answer or a question; see
:mod:`evidex.evaluate._base`) by their key, and for every metric gives:

- both runs' values, recomputed from the items both reports hold (the job's own
  :meth:`~evidex.evaluate._base.GoldenEvaluator.figures`, so they are the reports' figures
  when both hold the same items);
- the difference (report minus baseline) with a **paired bootstrap** interval: the items are
  resampled with replacement, the same resample is scored in both runs, and the percentiles
  of the differences bound it (:func:`~evidex.evaluate.intervals.bootstrap_cis`, seeded);
- a verdict: ``better`` or ``worse`` when the interval lies wholly on one side of zero in the
  measure's direction (:attr:`~evidex.evaluate.measures.Measure.better`), ``not significant``
  when it holds zero, ``higher``/``lower`` for shares with no better direction.

and lists the items whose judgment changed (the item's ``judgment``, never its reasons), with
both judgments, their reasons and sources, and whether the item got better, worse or neither
by its ``score``. :func:`regressed` is the rule ``evidex gate --baseline`` applies.

Nothing here reads a file: :func:`evidex.evaluate.run.read_report` reads and checks one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from evidex.errors import InputError
from evidex.evaluate._base import REPORT_FORMAT
from evidex.evaluate._util import jsonable
from evidex.evaluate.intervals import bootstrap_cis
from evidex.evaluate.measures import parse_measure
from evidex.evaluate.plots import excerpt, fmt_value
from evidex.evaluate.registry import get_evaluator

__all__ = [
    "check_report",
    "compare_reports",
    "comparison_json",
    "comparison_markdown",
    "interval_text",
    "judgment_text",
    "regressed",
    "signed_text",
]

Item = Mapping[str, Any]


def check_report(report: Mapping[str, Any], where: str) -> None:
    """Raise :class:`InputError` unless ``report`` keeps its items (report format 2 or later).

    An older report has its figures only; the message says how to write it again from the
    ``predictions.jsonl`` beside it (scoring is free: no judge is called)."""
    version = report.get("report_format", 1)
    if (
        isinstance(version, int)
        and version >= REPORT_FORMAT
        and isinstance(report.get("items"), list)
    ):
        return
    run = report.get("run") or {}
    job, golden = run.get("job") or report.get("job") or "JOB", run.get("golden") or "GOLDEN"
    raise InputError(
        f"this report (format {version}) was written before reports kept their items, which "
        "a comparison pairs; score its predictions again (no judge is called): evidex eval "
        f"{job} --golden {golden} --predictions DIR/predictions.jsonl -o DIR",
        where=where,
    )


def compare_reports(
    baseline: Mapping[str, Any],
    report: Mapping[str, Any],
    *,
    samples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """``report`` against ``baseline``: each metric side by side with the paired bootstrap
    interval of the difference, and the items whose judgment changed (JSON-ready).

    Both must be reports of one job (``report.json`` as :func:`~evidex.evaluate.run.evaluate`
    writes it, format 2). Items are paired by key in the baseline's order; items only one
    report holds are left out with a warning. An item both hold with a different golden label
    is an :class:`InputError`: the runs were scored on different golden sets, and a paired
    difference would mix the change of judge with the change of labels.
    """
    check_report(baseline, "the baseline report")
    check_report(report, "the report")
    job = str(baseline.get("job"))
    if report.get("job") != job:
        raise InputError(
            f"the baseline is a {job} report and the other a {report.get('job')} report: "
            "compare two runs of one job"
        )
    evaluator = get_evaluator(job)
    base_items, new_items = _keyed(baseline, "baseline"), _keyed(report, "report")
    common = [key for key in base_items if key in new_items]
    _check_gold(common, base_items, new_items)
    pairs = [(base_items[key], new_items[key]) for key in common]
    if not pairs:
        raise InputError(
            "the two reports have no item in common: were they made on one golden set?"
        )

    def difference(sample: Sequence[tuple[Item, Item]]) -> dict[str, float]:
        before = evaluator.figures([b for b, _ in sample], baseline)
        after = evaluator.figures([a for _, a in sample], report)
        return {k: _num(after[k]) - _num(before[k]) for k in before if k in after}

    intervals = bootstrap_cis(pairs, difference, samples=samples, level=level, seed=seed)
    before = evaluator.figures([b for b, _ in pairs], baseline)
    after = evaluator.figures([a for _, a in pairs], report)
    rows = []
    for measure in _shared_metrics(baseline, report):
        if measure in intervals:
            ci = intervals[measure]
            row = _row(measure, before[measure], after[measure], ci.low, ci.high, ci.samples)
        else:  # a figure the items do not give (consistency_kappa): the reports' own values
            old, new = baseline["metrics"][measure], report["metrics"][measure]
            row = _row(measure, old, new, math.nan, math.nan, 0)
        rows.append(row)
    changed = _changed(pairs)
    warnings = []
    only_base = [k for k in base_items if k not in new_items]
    only_new = [k for k in new_items if k not in base_items]
    unit = str(baseline.get("unit", "item"))
    if only_base or only_new:
        warnings.append(
            f"{len(only_base)} {unit}(s) only in the baseline and {len(only_new)} only in the "
            f"report are left out: the figures and differences are over the {len(pairs)} "
            f"{unit}(s) both hold"
        )
    return {
        "job": job,
        "unit": unit,
        "baseline": {"run": dict(baseline.get("run") or {})},
        "report": {"run": dict(report.get("run") or {})},
        "items": {
            "compared": len(pairs),
            "changed": len(changed),
            "only_in_baseline": only_base,
            "only_in_report": only_new,
        },
        "bootstrap": {"paired_over": unit, "samples": samples, "seed": seed, "level": level},
        "metrics": rows,
        "changed": changed,
        "warnings": warnings,
    }


def regressed(row: Mapping[str, Any], tolerance: float = 0.0) -> bool:
    """Whether a metric row of :func:`compare_reports` is a significant regression: the whole
    paired interval of the difference lies beyond ``tolerance`` on the worse side (below
    ``-tolerance`` for a figure where higher is better, above ``tolerance`` where lower is).
    A row without an interval, or of a share with no better direction, never is."""
    low, high = row.get("low"), row.get("high")
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return False
    if row.get("better") == "higher":
        return bool(high < -tolerance)
    if row.get("better") == "lower":
        return bool(low > tolerance)
    return False


def _keyed(report: Mapping[str, Any], which: str) -> dict[str, Item]:
    out: dict[str, Item] = {}
    for item in report["items"]:
        key = str(item.get("key"))
        if key in out:
            raise InputError(f"the {which} report holds item {key!r} twice")
        out[key] = item
    return out


def _check_gold(common: Sequence[str], base: Mapping[str, Item], new: Mapping[str, Item]) -> None:
    differ = [key for key in common if base[key].get("gold") != new[key].get("gold")]
    if differ:
        raise InputError(
            f"{len(differ)} item(s) have different golden labels in the two reports ("
            + ", ".join(repr(k) for k in differ[:5])
            + (" ..." if len(differ) > 5 else "")
            + "): compare runs scored on one golden set"
        )


def _shared_metrics(baseline: Mapping[str, Any], report: Mapping[str, Any]) -> list[str]:
    theirs = report.get("metrics") or {}
    return [k for k in baseline.get("metrics") or {} if k in theirs]


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def _row(
    measure: str, before: Any, after: Any, low: float, high: float, samples: int
) -> dict[str, Any]:
    old, new = _num(before), _num(after)
    better = parse_measure(measure).better
    row = {
        "measure": measure,
        "better": better,
        "baseline": old,
        "report": new,
        "difference": new - old,
        "low": low,
        "high": high,
        "samples": samples,
    }
    row["verdict"] = _verdict(row)
    return row


def _verdict(row: Mapping[str, Any]) -> str:
    low, high = row["low"], row["high"]
    if math.isnan(low) or math.isnan(high):
        return "undefined"
    if low <= 0 <= high:
        return "not significant"
    rose = low > 0
    if row["better"] is None:
        return "higher" if rose else "lower"
    return "better" if rose == (row["better"] == "higher") else "worse"


_EFFECT_ORDER = {"worse": 0, "better": 1, "same": 2}


def _changed(pairs: Sequence[tuple[Item, Item]]) -> list[dict[str, Any]]:
    """The items whose judgment differs, the ones that got worse first (then better, then
    neither), each in the baseline's order."""
    out = []
    for before, after in pairs:
        if before.get("judgment") == after.get("judgment"):
            continue
        old, new = _num(before.get("score")), _num(after.get("score"))
        effect = "worse" if new < old else "better" if new > old else "same"
        out.append(
            {
                "key": before.get("key"),
                "gold": before.get("gold"),
                "effect": effect,
                "baseline": _side(before),
                "report": _side(after),
            }
        )
    return sorted(out, key=lambda c: _EFFECT_ORDER[c["effect"]])


def _side(item: Item) -> dict[str, Any]:
    return {k: item.get(k) for k in ("judgment", "why", "source", "score")}


# ---------------------------------------------------------------------- rendering


def comparison_json(comparison: Mapping[str, Any]) -> str:
    """The comparison as JSON text (an undefined figure as ``null``: JSON has no NaN)."""
    return json.dumps(jsonable(comparison), indent=2, ensure_ascii=False) + "\n"


def comparison_markdown(comparison: Mapping[str, Any], *, limit: int = 50) -> str:
    """The comparison as a Markdown page: both runs, the metrics side by side with the
    difference and its interval, and up to ``limit`` changed items (all are in the JSON)."""
    unit, boot = comparison["unit"], comparison["bootstrap"]
    level = f"{boot['level']:.0%}"
    runs = (comparison["baseline"]["run"], comparison["report"]["run"])
    lines = [f"# Comparison: {comparison['job']}, run against run", ""]
    lines += ["| | baseline | report |", "|---|---|---|"]
    for label, key in _RUN_FACTS:
        if any(key in run for run in runs):
            shown = [f"`{r[key]}`" if r.get(key) not in (None, "") else "–" for r in runs]
            lines.append(f"| {label} | " + " | ".join(shown) + " |")
    counts = comparison["items"]
    lines += [
        "",
        f"Paired over the {counts['compared']} {unit}s both reports hold: "
        f"{boot['samples']} bootstrap resamples of the {unit}s (seed {boot['seed']}), each scored "
        f"in both runs. A difference (report minus baseline) is significant when its {level} "
        "interval leaves out 0.",
        "",
        f"| measure | baseline | report | difference | {level} interval | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for row in comparison["metrics"]:
        lines.append(
            f"| `{row['measure']}` | {fmt_value(row['baseline'])} | {fmt_value(row['report'])} "
            f"| {signed_text(row['difference'])} | {interval_text(row)} | {row['verdict']} |"
        )
    for warning in comparison["warnings"]:
        lines += ["", f"> **Warning:** {warning}"]
    changed = comparison["changed"]
    lines += ["", f"## Changed judgments: {len(changed)} of {counts['compared']} {unit}s", ""]
    if not changed:
        lines.append(f"None: every {unit} is judged as in the baseline.")
    for change in changed[:limit]:
        gold = "" if change["gold"] is None else f" (golden: {judgment_text(change['gold'])})"
        lines.append(f"- **`{change['key']}`**{gold}: {change['effect']}")
        for side in ("baseline", "report"):
            judged = change[side]
            why = judgment_text(judged.get("why"))
            lines.append(
                f"  - {side}: {judgment_text(judged['judgment'])} ({judged.get('source')})"
                + (f": {excerpt(why, 300)}" if why else "")
            )
    if len(changed) > limit:
        lines.append(f"\n{len(changed) - limit} more changed {unit}s are in the JSON output.")
    return "\n".join(lines) + "\n"


_RUN_FACTS = (
    ("judge", "judge_id"),
    ("model version", "model_version"),
    ("prompt version", "prompt_version"),
    ("golden set", "golden"),
    ("predictions", "predictions"),
    ("items", "items"),
    ("finished", "finished"),
)


def signed_text(value: float) -> str:
    """A difference with its sign, three decimals (``undefined`` for NaN)."""
    return "undefined" if math.isnan(value) else f"{value:+.3f}"


def interval_text(row: Mapping[str, Any]) -> str:
    """A metric row's interval of the difference, ``+0.010 to +0.120`` (or ``undefined``)."""
    low, high = row["low"], row["high"]
    if math.isnan(low) or math.isnan(high):
        return "undefined"
    return f"{low:+.3f} to {high:+.3f}"


def judgment_text(value: Any) -> str:
    """A judgment or its reasons on one line (the Markdown page's and the review UI's): a
    label as is, a list joined by ``; `` (a pair such as a claim and its grade joined by an
    arrow), a mapping as ``key value`` parts."""
    if value is None:
        return ""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {judgment_text(v)}" for k, v in value.items() if judgment_text(v))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (list, tuple)) for v in value):
            return "; ".join(" → ".join(judgment_text(x) for x in v) for v in value)
        return "; ".join(judgment_text(v) for v in value) or "none"
    if isinstance(value, float):
        return fmt_value(value)
    return str(value)
