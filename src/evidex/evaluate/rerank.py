"""The rerank evaluator: the judge's rankings against graded judgments, beside retrieval order.

For each golden query the rerank job orders its candidates; the report gives nDCG@10 (linear
gain, trec_eval's formula: the ideal list is built from every judged grade of the query),
P@10 and MRR at two relevance levels, each with a bootstrap interval over queries, and the
same figures for the candidates' own retrieval order. The difference is what the judge adds:
a reranker that does not beat its input order is not worth its cost. The worst queries are
those where the judge's ranking lost the most nDCG@10 against retrieval order.

Options (``EvalOptions.extra``, and ``evidex eval rerank`` flags): ``strategy`` (default
``pointwise``: one score per passage, the natural strategy of ``local:minilm`` and the cheapest
for chat judges), ``top_n`` (candidates reranked, default the job's 30; the rest keep their
retrieval order below), ``top_k`` (pairwise only) and, for a TREC DL folder, ``pool``.

Prediction rows (``predictions.jsonl``, and what ``--predictions`` reads)::

    {"query_id": "q1", "query": "...", "ranking": ["p3", "p1", "p2"], "source": "judge"}

``query_id`` (else ``query``) joins a row to its golden query; ``ranking`` lists passage ids,
best first (ids without a judgment count as grade 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidex.errors import ConfigError, InputError
from evidex.evaluate import metrics as m
from evidex.evaluate._base import GoldenEvaluator, Prediction, Scoring, declared_measures
from evidex.evaluate._util import interval_dict, joint_version, provenance, source_counts
from evidex.evaluate.datasets import trec_dl_rerank
from evidex.evaluate.golden import RerankGolden, load_golden
from evidex.evaluate.layouts import Layout
from evidex.evaluate.plots import excerpt, fmt_counts, fmt_interval, fmt_value
from evidex.evaluate.registry import EvalOptions
from evidex.jobs.rerank import DEFAULT_TOP_K, DEFAULT_TOP_N, arerank
from evidex.tasks.rerank import PAIR_TEMPLATE, RERANK_TEMPLATE, SCORE_TEMPLATE

__all__ = ["DEFAULT_STRATEGY", "MEASURES", "RerankEvaluator", "retrieval_order"]

DEFAULT_STRATEGY = "pointwise"
MEASURES = declared_measures("rerank")
"""Report keys (canonical measure strings, declared in the job's definition): grade ≥ 1 is
relevant unless ``rel`` says more; TREC DL's binary figures conventionally use ``rel=2``."""
_SHOWN = 3
"""Passages of the judge's ranking shown for each of the worst queries."""

Ranking = Sequence[str]
_COMPUTE: dict[str, Callable[[Ranking, Mapping[str, int]], float]] = {
    "nDCG@10": lambda r, g: m.ndcg_at_k(r, g, 10, "linear"),
    "P@10": lambda r, g: m.precision_at_k(r, g, 10, rel=1),
    "P(rel=2)@10": lambda r, g: m.precision_at_k(r, g, 10, rel=2),
    "RR": lambda r, g: m.reciprocal_rank(r, g, rel=1),
    "RR(rel=2)": lambda r, g: m.reciprocal_rank(r, g, rel=2),
}


def retrieval_order(record: RerankGolden) -> list[str]:
    """The candidates' ids in retrieval order: by ``rank`` when every one has it, else as
    listed (the order the rerank job itself starts from)."""
    items = list(record.candidates)
    if items and all(p.rank is not None for p in items):
        items.sort(key=lambda p: p.rank or 0)
    return [p.passage_id for p in items]


def _row_keys(row: Mapping[str, Any]) -> list[str]:
    return [str(k) for k in (row.get("query_id"), row.get("query")) if k]


def _ranking(row: Mapping[str, Any]) -> list[str]:
    ranking = row.get("ranking")
    if not isinstance(ranking, list) or not all(isinstance(x, (str, int)) for x in ranking):
        raise InputError(
            f"the prediction for query {_row_keys(row)[:1]} needs 'ranking': a list of passage "
            "ids, best first"
        )
    return [str(x) for x in ranking]


def _read_trec_dl(root: Path, extra: Mapping[str, Any]) -> list[RerankGolden]:
    """A TREC DL folder's queries, with the candidate pool ``extra["pool"]`` names."""
    pool = str(extra.get("pool", "run"))
    if pool not in ("run", "judged"):
        raise ConfigError(f"the rerank pool is 'run' or 'judged', got {pool!r}")
    return trec_dl_rerank(root, pool="judged" if pool == "judged" else "run")


class RerankEvaluator(GoldenEvaluator[RerankGolden]):
    """Evaluator for the rerank job (see :mod:`evidex.evaluate.registry`)."""

    job = "rerank"
    what = "query"
    layouts = (
        Layout(
            "TREC DL",
            ("queries.tsv", "qrels.txt", "passages.jsonl", "bm25_top100.run"),
            _read_trec_dl,
        ),
    )

    @property
    def prompt_version(self) -> str:
        """One version for every rerank prompt (allpairs/listwise, pairwise, pointwise): the
        strategy is part of the run's options, and an edit to any prompt shows here."""
        return joint_version(RERANK_TEMPLATE, PAIR_TEMPLATE, SCORE_TEMPLATE)

    def load(self, path: Path, options: EvalOptions) -> list[RerankGolden]:
        return load_golden(path, "rerank")

    def record_keys(self, record: RerankGolden) -> list[str]:
        return [record.group, record.query]

    def row_keys(self, row: Mapping[str, Any]) -> list[str]:
        return _row_keys(row)

    async def predict_one(self, record: RerankGolden, run: Prediction) -> dict[str, Any]:
        extra = run.options.extra
        result = await arerank(
            record.query,
            record.candidates,
            strategy=str(extra.get("strategy") or DEFAULT_STRATEGY),
            top_k=int(extra.get("top_k") or DEFAULT_TOP_K),
            top_n=int(extra.get("top_n") or DEFAULT_TOP_N),
            judge=run.judge,
            store=run.store,
            settings=run.settings,
        )
        return {
            "query_id": record.query_id,
            "query": record.query,
            "ranking": result.ids(),
            "justifications": {r.passage_id: r.justification for r in result.ranked_passages[:10]},
            "strategy": result.strategy,
            "prompt_version": result.prompt_version,
            **provenance(result),
        }

    # ------------------------------------------------------------------ scoring

    def measure(self, scoring: Scoring[RerankGolden]) -> dict[str, Any]:
        records, aligned, options = scoring.records, scoring.rows, scoring.options
        items: list[dict[str, Any]] = []
        for record, row in zip(records, aligned, strict=True):
            judged, base = _ranking(row), retrieval_order(record)
            values = {k: f(judged, record.grades) for k, f in _COMPUTE.items()}
            notes = row.get("justifications") or {}
            items.append(
                {
                    "key": record.group,
                    "gold": None,
                    "judgment": judged[:10],
                    "why": {pid: str(notes[pid]) for pid in judged[:_SHOWN] if pid in notes},
                    "score": values["nDCG@10"],
                    "source": str(row.get("source", "unknown")),
                    "values": values,
                    "baseline": {k: f(base, record.grades) for k, f in _COMPUTE.items()},
                }
            )
        metrics, intervals = self.measured(items, {}, options, MEASURES)
        lift = m.bootstrap_ci(
            items,
            lambda s: _mean([u["values"]["nDCG@10"] - u["baseline"]["nDCG@10"] for u in s]),
            samples=options.bootstrap_samples,
            seed=options.seed,
        )
        baseline = {k: _mean([u["baseline"][k] for u in items]) for k in MEASURES}
        per_query = [
            {
                "query_id": r.query_id,
                "query": r.query,
                "candidates": len(r.candidates),
                "baseline": u["baseline"]["nDCG@10"],
                "judge": u["values"]["nDCG@10"],
                "delta": u["values"]["nDCG@10"] - u["baseline"]["nDCG@10"],
            }
            for r, u in zip(records, items, strict=True)
        ]
        sources, warnings = source_counts(aligned, "rankings (retrieval order kept)")
        if not any(any(g > 0 for g in r.grades.values()) for r in records):
            warnings.append("no golden query has a relevant passage: every figure is 0")
        return self.report(
            metrics,
            intervals,
            sources=sources,
            warnings=warnings,
            items=items,
            gain="linear",
            baseline=baseline,
            lift={
                "measure": "nDCG@10",
                "value": lift.value,
                **interval_dict(lift),
            },
            per_query=per_query,
            worst=_worst(records, aligned, per_query, options.worst),
            strategies=dict(Counter(str(row.get("strategy", "unknown")) for row in aligned)),
        )

    def figures(
        self, items: Sequence[Mapping[str, Any]], report: Mapping[str, Any]
    ) -> dict[str, float]:
        """Each measure's mean over the queries (every item holds its query's values, computed
        against the query's judged grades when it was scored)."""
        return {k: _mean([u["values"][k] for u in items]) for k in MEASURES}

    # ------------------------------------------------------------------ rendering

    def markdown(self, report: Mapping[str, Any], out_dir: Path) -> str:
        met, base, ci, lift = (
            report["metrics"],
            report["baseline"],
            report["intervals"],
            report["lift"],
        )
        lines = [
            "## Ranking quality",
            "",
            f"nDCG@10 (linear gain, trec_eval) **{fmt_value(met['nDCG@10'])}** against "
            f"{fmt_value(base['nDCG@10'])} for retrieval order: a lift of "
            f"**{lift['value']:+.3f}** (95% bootstrap interval over queries "
            f"{fmt_interval(lift)}).",
            "",
            "| measure | retrieval order | judge | lift | judge 95% interval |",
            "|---|---:|---:|---:|---|",
        ]
        for key in met:
            lines.append(
                f"| `{key}` | {fmt_value(base[key])} | {fmt_value(met[key])} | "
                f"{met[key] - base[key]:+.3f} | {fmt_interval(ci.get(key))} |"
            )
        lines += [
            "",
            f"Strategies: {fmt_counts(report['strategies'])}. "
            f"Sources: {fmt_counts(report['sources'])}.",
            "",
            "## Per query (nDCG@10)",
            "",
            "| query | candidates | retrieval order | judge | change |",
            "|---|---:|---:|---:|---:|",
        ]
        for q in report["per_query"]:
            lines.append(
                f"| {excerpt(q['query'], 60)} | {q['candidates']} | {fmt_value(q['baseline'])} |"
                f" {fmt_value(q['judge'])} | {q['delta']:+.3f} |"
            )
        lines += ["", "## Worst queries (largest nDCG@10 drop against retrieval order)", ""]
        if not report["worst"]:
            lines.append("None: the judge's ranking is never worse than retrieval order.")
        for w in report["worst"]:
            lines.append(
                f"- **{w['delta']:+.3f}** ({fmt_value(w['baseline'])} → {fmt_value(w['judge'])}) "
                f"query {w['query']!r} ({w['source']}); the judge's top passages:"
            )
            for p in w["top"]:
                lines.append(
                    f"  - `{p['passage_id']}` (grade {p['grade']}): {p['justification']}  \n"
                    f"    {p['text']!r}"
                )
        return "\n".join(lines)


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _worst(
    records: Sequence[RerankGolden],
    aligned: Sequence[Mapping[str, Any]],
    per_query: Sequence[Mapping[str, Any]],
    limit: int,
) -> list[dict[str, Any]]:
    """Queries whose nDCG@10 fell against retrieval order, the largest drop first."""
    order = sorted(
        (i for i, q in enumerate(per_query) if q["delta"] < 0),
        key=lambda i: (per_query[i]["delta"], i),
    )
    out = []
    for i in order[:limit]:
        record, row, q = records[i], aligned[i], per_query[i]
        texts = {p.passage_id: p.text for p in record.candidates}
        notes = row.get("justifications") or {}
        out.append(
            {
                **q,
                "source": str(row.get("source", "unknown")),
                "top": [
                    {
                        "passage_id": pid,
                        "grade": record.grades.get(pid, 0),
                        "justification": str(notes.get(pid) or "(none given)"),
                        "text": excerpt(texts.get(pid, ""), 200),
                    }
                    for pid in _ranking(row)[:_SHOWN]
                ],
            }
        )
    return out
