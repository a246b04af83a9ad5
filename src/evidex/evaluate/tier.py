"""The tier evaluator: agreement of a judge's tiers with golden tiers.

Reports Cohen's kappa against the spec's 0.7 bar with a bootstrap interval (items resampled),
linear- and quadratic-weighted kappa (tiers are ordered), binarised kappa at every boundary,
accuracy, macro-F1, per-tier agreement, the confusion matrix (PNG and table), which adjacent
boundaries cause the disagreements, the sources of the judgments (judge, cache, fallback) and
the worst disagreements with the judge's justification.

Prediction rows (``predictions.jsonl``, and what ``--predictions`` reads)::

    {"query_id": "q1", "query": "...", "passage_id": "p7", "tier": "irrelevant",
     "justification": "...", "source": "judge"}

``query_id`` (else ``query``) and ``passage_id`` join a row to its golden pair.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidex.errors import InputError
from evidex.evaluate import metrics as m
from evidex.evaluate._base import GoldenEvaluator, Prediction, Scoring
from evidex.evaluate._util import align_rows, prf_dict, provenance, source_counts
from evidex.evaluate.datasets import llmjudge_tier, scheme_of, trec_dl_tier
from evidex.evaluate.golden import TierGolden, load_golden
from evidex.evaluate.layouts import Layout
from evidex.evaluate.plots import (
    confusion_markdown,
    confusion_png,
    excerpt,
    fmt_interval,
    fmt_value,
    worst_section,
)
from evidex.evaluate.registry import EvalOptions
from evidex.harness.ports import StorePort
from evidex.harness.settings import HarnessSettings
from evidex.jobs.tier import DEFAULT_BATCH, atier_many
from evidex.judging import Judge
from evidex.tasks.tier import TIER_TEMPLATE
from evidex.types import Passage, TierScheme

__all__ = ["KAPPA_BAR", "TierEvaluator", "align_tier_predictions"]

KAPPA_BAR = 0.7
"""The spec's agreement bar: below it, revise the tier definitions, not the temperature."""


def _scheme(options: EvalOptions) -> TierScheme:
    return scheme_of(options.extra)


def _record_keys(record: TierGolden) -> list[str]:
    return [record.key, f"{record.query}\x1f{record.passage_id}"]


def _row_keys(row: Mapping[str, Any]) -> list[str]:
    pid = str(row.get("passage_id", ""))
    return [f"{q}\x1f{pid}" for q in (row.get("query_id"), row.get("query")) if q]


def align_tier_predictions(
    records: Sequence[TierGolden], rows: Sequence[Mapping[str, Any]], scheme: TierScheme
) -> list[Mapping[str, Any]]:
    """The prediction row of each golden pair, in golden order.

    Raises :class:`InputError` when pairs have no prediction (naming the first ones) or a
    prediction uses a tier outside ``scheme``.
    """
    for row in rows:
        tier = row.get("tier")
        if tier not in scheme.names:
            raise InputError(
                f"prediction for passage {row.get('passage_id')!r} has tier {tier!r}, "
                f"not one of {scheme.names}"
            )
    return align_rows(
        records, rows, _record_keys, _row_keys, "pair", label=lambda r: f"{r.group}/{r.passage_id}"
    )


class TierEvaluator(GoldenEvaluator[TierGolden]):
    """Evaluator for the tier job (see :mod:`evidex.evaluate.registry`): one query's pairs
    are one group, judged in one job call."""

    job = "tier"
    what = "pair"
    layouts = (
        Layout("LLMJudge", ("qrels_dev.txt",), lambda root, x: llmjudge_tier(root, scheme_of(x))),
        Layout(
            "TREC DL",
            ("qrels.txt",),
            lambda root, x: trec_dl_tier(root, scheme_of(x)),
            detect=False,
        ),
    )

    @property
    def prompt_version(self) -> str:
        return TIER_TEMPLATE.version

    def load(self, path: Path, options: EvalOptions) -> list[TierGolden]:
        return load_golden(path, "tier", labels=_scheme(options).names)

    def group(self, record: TierGolden) -> str:
        return record.group

    def record_keys(self, record: TierGolden) -> list[str]:
        return _record_keys(record)

    def row_keys(self, row: Mapping[str, Any]) -> list[str]:
        return _row_keys(row)

    def align(
        self, records: Sequence[TierGolden], rows: Sequence[Mapping[str, Any]], options: EvalOptions
    ) -> list[Mapping[str, Any]]:
        return align_tier_predictions(records, rows, _scheme(options))

    async def predict_group(
        self, records: Sequence[TierGolden], run: Prediction
    ) -> list[dict[str, Any]]:
        (rows,) = await self.predict_together(
            [records], run.judge, run.store, run.options, run.settings
        )
        return rows

    def run_together(self, judge: Judge, settings: HarnessSettings | None) -> int:
        """How many queries :meth:`predict_together` takes at once: under a cascade's frontier
        rule, those run together share its budget, as the rule was fitted and measured
        (``bench/cascade_frontier.py``), so up to ``max_concurrency``; otherwise one."""
        staging = judge.staging()
        if staging is None or staging.frontier() is None:
            return 1
        return max(1, (settings or HarnessSettings.from_config()).max_concurrency)

    async def predict_together(
        self,
        groups: Sequence[Sequence[TierGolden]],
        judge: Judge,
        store: StorePort,
        options: EvalOptions,
        settings: HarnessSettings | None,
    ) -> list[list[dict[str, Any]]]:
        """The rows of several queries, tiered in one run (:func:`~evidex.jobs.tier.atier_many`)."""
        results = await atier_many(
            [
                {
                    "query": records[0].query,
                    "passages": [Passage(passage_id=r.passage_id, text=r.text) for r in records],
                }
                for records in groups
            ],
            judge=judge,
            store=store,
            tiers=_scheme(options),
            batch_size=int(options.extra.get("batch_size", DEFAULT_BATCH)),
            settings=settings,
        )
        return [
            [
                {
                    "query_id": records[0].query_id,
                    "query": records[0].query,
                    "passage_id": a.passage_id,
                    "tier": a.tier,
                    "justification": a.justification,
                    **provenance(a),
                }
                for a in result.classifications
            ]
            for records, result in zip(groups, results, strict=True)
        ]

    async def consistency(
        self, records: Sequence[TierGolden], judge: Judge, store: StorePort, options: EvalOptions
    ) -> dict[str, Any]:
        from evidex.evaluate.consistency import atier_consistency

        groups: dict[str, list[TierGolden]] = {}
        for r in records:
            groups.setdefault(r.group, []).append(r)
        queries = [
            (g[0].query, [Passage(passage_id=r.passage_id, text=r.text) for r in g])
            for g in groups.values()
        ]
        return await atier_consistency(
            queries, judge, store=store, seed=options.seed, scheme=_scheme(options)
        )

    # ------------------------------------------------------------------ scoring

    def measure(self, scoring: Scoring[TierGolden]) -> dict[str, Any]:
        records, aligned, options = scoring.records, scoring.rows, scoring.options
        scheme = _scheme(options)
        names = scheme.names
        gold = [r.tier for r in records]
        pred = [str(row["tier"]) for row in aligned]
        items = [
            {
                "key": f"{r.group} / {r.passage_id}",
                "gold": r.tier,
                "judgment": str(row["tier"]),
                "why": str(row.get("justification") or ""),
                "score": float(r.tier == row["tier"]),
                "source": str(row.get("source", "unknown")),
            }
            for r, row in zip(records, aligned, strict=True)
        ]
        metrics, intervals = self.measured(
            items, {"tiers": names}, options, ("kappa", "kappa_linear", "kappa_quadratic")
        )
        matrix = m.confusion_matrix(gold, pred, names)
        what = f"judgments (the conservative {scheme.fallback_tier} tier)"
        sources, warnings = source_counts(aligned, what)
        if len(set(gold)) < 2:
            warnings.append("the golden set uses a single tier: kappa is undefined")
        kappa = metrics["kappa"]
        return self.report(
            metrics,
            intervals,
            sources=sources,
            warnings=warnings,
            items=items,
            tiers=names,
            bar={
                "measure": "kappa",
                "floor": KAPPA_BAR,
                "passed": bool(not math.isnan(kappa) and kappa >= KAPPA_BAR),
            },
            confusion={"labels": names, "matrix": matrix.tolist()},
            per_tier={t: prf_dict(v) for t, v in m.per_label_agreement(gold, pred, names).items()},
            boundaries=m.boundary_confusions(matrix, names),
            worst=_worst(records, aligned, names, options.worst),
        )

    def figures(
        self, items: Sequence[Mapping[str, Any]], report: Mapping[str, Any]
    ) -> dict[str, float]:
        """Kappa (plain, linear, quadratic), the binarised kappa at each boundary, accuracy
        and macro-F1, all from the one confusion matrix of the items' golden and judged tiers
        over the report's scheme."""
        names = list(report["tiers"])
        matrix = m.confusion_matrix(
            [str(i["gold"]) for i in items], [str(i["judgment"]) for i in items], names
        )
        out = {
            "kappa": m.kappa_from_matrix(matrix),
            "kappa_linear": m.kappa_from_matrix(matrix, "linear"),
            "kappa_quadratic": m.kappa_from_matrix(matrix, "quadratic"),
        }
        for boundary in names[:-1]:
            collapsed = m.collapse_at(matrix, names, boundary)
            out[f"kappa_binary(boundary={boundary})"] = m.kappa_from_matrix(collapsed)
        out["accuracy"] = m.accuracy_from_matrix(matrix)
        out["macro_f1"] = m.macro_f1_from_matrix(matrix, names)
        return out

    # ------------------------------------------------------------------ rendering

    def markdown(self, report: Mapping[str, Any], out_dir: Path) -> str:
        names = list(report["tiers"])
        matrix = np.array(report["confusion"]["matrix"], dtype=np.int64)
        met, ci = report["metrics"], report["intervals"]
        bar = report["bar"]
        verdict = "meets" if bar["passed"] else "is below"
        lines = [
            "## Agreement",
            "",
            f"Cohen's kappa **{_fmt(met['kappa'])}** ({_ci(ci['kappa'])}) {verdict} the "
            f"{bar['floor']} bar.",
            "",
            "| measure | value | 95% bootstrap interval |",
            "|---|---:|---|",
        ]
        for key, value in met.items():
            lines.append(
                f"| `{key}` | {_fmt(value)} | {_ci(ci[key], bare=True) if key in ci else ''} |"
            )
        lines += ["", "## Per-tier agreement", "", "| tier | golden | recall | precision | F1 |"]
        lines.append("|---|---:|---:|---:|---:|")
        for tier, v in report["per_tier"].items():
            lines.append(
                f"| {tier} | {v['support']} | {_fmt(v['recall'])} | {_fmt(v['precision'])} | "
                f"{_fmt(v['f1'])} |"
            )
        lines += ["", "## Confusion matrix", ""]
        if confusion_png(matrix, names, out_dir / "confusion.png", "tier: golden vs judge"):
            lines += ["![confusion matrix](confusion.png)", ""]
        lines += [confusion_markdown(matrix, names), "", "## Where the disagreements are", ""]
        lines += _boundary_lines(report["boundaries"])
        lines += ["", f"Sources: {', '.join(f'{k} {v}' for k, v in report['sources'].items())}"]
        lines += worst_section(
            report["worst"], "None: the judge agrees with every golden tier.", _worst_line
        )
        if "consistency" in report:
            c = report["consistency"]
            lines += [
                "",
                "## Consistency",
                "",
                f"{len(c['runs'])} runs over {c['items']} passages (shuffled, batch sizes "
                f"{', '.join(str(r['batch_size']) for r in c['runs'])}): kappa vs the first run "
                f"{', '.join(_fmt(k) for k in c['kappa'])}; same label in every run: "
                f"{_fmt(c['agreement'])}.",
            ]
        return "\n".join(lines)


def _worst(
    records: Sequence[TierGolden],
    aligned: Sequence[Mapping[str, Any]],
    names: list[str],
    limit: int,
) -> list[dict[str, Any]]:
    """Disagreements, the farthest apart first (then file order)."""
    off = [
        (abs(names.index(r.tier) - names.index(str(row["tier"]))), i, r, row)
        for i, (r, row) in enumerate(zip(records, aligned, strict=True))
        if r.tier != row["tier"]
    ]
    off.sort(key=lambda x: (-x[0], x[1]))
    return [
        {
            "query": r.query,
            "passage_id": r.passage_id,
            "golden": r.tier,
            "judge": row["tier"],
            "distance": d,
            "justification": str(row.get("justification") or "(none given)"),
            "source": str(row.get("source", "unknown")),
            "text": excerpt(r.text),
        }
        for d, _, r, row in off[:limit]
    ]


def _boundary_lines(b: Mapping[str, Any]) -> list[str]:
    lines = [
        f"{b['disagreements']} disagreements; between adjacent tiers:",
        "",
        "| boundary | judge one tier lower | judge one tier higher | share |",
        "|---|---:|---:|---:|",
    ]
    for p in b["adjacent"]:
        lines.append(f"| {p['boundary']} | {p['down']} | {p['up']} | {_fmt(p['share'])} |")
    lines.append(f"\nTwo or more tiers apart: {b['far']}.")
    return lines


def _fmt(value: Any) -> str:
    return fmt_value(value, "undefined (a single label)")


def _ci(interval: Mapping[str, Any], *, bare: bool = False) -> str:
    text = fmt_interval(interval)
    return text if bare or text == "undefined" else f"95% CI {text}"


def _worst_line(w: Mapping[str, Any]) -> str:
    return (
        f"- **{w['golden']} → {w['judge']}** (query {w['query']!r}, passage "
        f"`{w['passage_id']}`, {w['source']}): {w['justification']}  \n"
        f"  passage: {w['text']!r}"
    )
