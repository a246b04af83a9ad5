"""Fit the tier cut points of ``local:qwen`` ``mode=score`` on LLMJudge dev pairs.

    python bench/fit_qwen_cut_points.py [--data ../shared/data] [--queries 10] [--per-query 8]
                                        [--seed 1] [--scores FILE]

Draws ``--queries`` LLMJudge dev queries (seeded) outside the two samples of
``bench/qwen_modes.py`` (the 5 queries of the tier_agreement_llm sample and the speed query),
``--per-query`` pairs of each (the data's own grade mix), reads each pair's
``s = p(Yes) / (p(Yes) + p(No))`` from the shipped model (the question of
:mod:`evidex.judges._qwen_grades`) and fits the three cut points that maximise Cohen's kappa
against NIST (grades 3..0 as the four default tiers) by
:func:`evidex.evaluate.calibration.fit_thresholds`, the fit ``local:minilm`` uses. Prints
the cut points to paste into ``_qwen_grades.CUT_POINTS`` and writes the figures to
docs/benchmarks.md, section ``qwen_cut_points``. ``--scores FILE`` keeps every pair's ``s``
(JSON) as it goes, and scores only the pairs it does not hold yet. A pair whose prompt does
not fit the model's context window is skipped (counted in the section).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from sklearn.metrics import cohen_kappa_score

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section
from evidex.errors import JudgeUnavailable
from evidex.evaluate import datasets
from evidex.evaluate.calibration import fit_thresholds, tier_of_score
from evidex.evaluate.golden import TierGolden
from evidex.judges._qwen import QwenJudge, QwenOptions
from evidex.judges._qwen_grades import relevance
from qwen_modes import speed_query
from tier_agreement_llm import sample_by_query

ROOT = Path(__file__).resolve().parent.parent


def fit_pairs(
    records: list[TierGolden], queries: int, per_query: int, seed: int
) -> list[TierGolden]:
    """Pairs of queries that neither bench sample of qwen_modes.py uses."""
    used = {r.query_id or r.query for r in sample_by_query(records, 5, 8, 0)}
    used |= {r.query_id or r.query for r in speed_query(records, 10, 0)}
    unused = [r for r in records if (r.query_id or r.query) not in used]
    return sample_by_query(unused, queries, per_query, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--per-query", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scores", type=Path)
    args = parser.parse_args()

    records = datasets.llmjudge_tier(args.data / "llmjudge")
    pairs = fit_pairs(records, args.queries, args.per_query, args.seed)
    load = os.getloadavg()
    values: dict[str, float | None] = {}
    if args.scores and args.scores.exists():
        values = json.loads(args.scores.read_text())
    todo = [r for r in pairs if f"{r.query_id}/{r.passage_id}" not in values]
    if todo:
        judge = QwenJudge(options=QwenOptions(mode="score"))

        def score(messages: list[dict[str, str]], candidates: list[str], prefix: str) -> Any:
            return judge.candidate_scores(messages, candidates, reply_prefix=prefix)

    for i, r in enumerate(todo, 1):
        key = f"{r.query_id}/{r.passage_id}"
        try:
            values[key] = relevance(score, r.query, r.text)
        except JudgeUnavailable as exc:  # a passage longer than the context window
            values[key] = None
            print(f"{key}: skipped ({exc})")
        print(f"{i}/{len(todo)} grade {r.grade} s {values[key]}")
        if args.scores:
            args.scores.write_text(json.dumps(values))
    skipped = sum(values[f"{r.query_id}/{r.passage_id}"] is None for r in pairs)
    pairs = [r for r in pairs if values[f"{r.query_id}/{r.passage_id}"] is not None]
    s = [float(values[f"{r.query_id}/{r.passage_id}"] or 0.0) for r in pairs]
    gold = [3 - (r.grade or 0) for r in pairs]  # 0 = directly-supporting
    cuts, kappa = fit_thresholds(s, gold, 4)
    predicted = [tier_of_score(v, cuts) for v in s]
    check = cohen_kappa_score(gold, predicted)
    means = {
        g: statistics.fmean(v for v, r in zip(s, pairs, strict=True) if r.grade == g)
        for g in (0, 1, 2, 3)
        if any(r.grade == g for r in pairs)
    }
    counts = {g: sum(r.grade == g for r in pairs) for g in (0, 1, 2, 3)}
    print(f"cut points {[round(c, 4) for c in cuts]}, fit kappa {kappa:.3f} ({check:.3f})")
    print("mean s by NIST grade " + ", ".join(f"{g}: {m:.3f}" for g, m in means.items()))
    body = "\n".join(
        [
            "Load average (1, 5, 15 min) at the start: {:.1f}, {:.1f}, {:.1f}; 2 cores, one "
            "llama.cpp thread.".format(*load),
            "",
            f"{len(pairs)} LLMJudge dev pairs: {args.queries} queries drawn with seed "
            f"{args.seed} outside the samples of `bench/qwen_modes.py`, {args.per_query} "
            "pairs each (NIST grades 0/1/2/3: "
            + "/".join(str(counts[g]) for g in (0, 1, 2, 3))
            + f") after {skipped} pairs skipped (longer than the 4096-token context window).",
            "",
            "| NIST grade | mean s = p(Yes)/(p(Yes)+p(No)) |",
            "|---:|---:|",
            *(f"| {g} | {m:.3f} |" for g, m in means.items()),
            "",
            "Cut points (minimum s of directly-supporting, contextually-relevant, "
            f"tangentially-related): **{', '.join(f'{c:.4f}' for c in cuts)}**, Cohen's kappa "
            f"{kappa:.3f} on these fit pairs (in-sample; the held-out figure is "
            "qwen_modes_agreement's).",
        ]
    )
    write_section("qwen_cut_points", "local:qwen mode=score: tier cut points", body)


if __name__ == "__main__":
    main()
