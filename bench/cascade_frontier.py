"""The frontier rule of a cascade on TREC DL 2019, out of set: fit on one half of the
queries, measure on the other, both ways round, with bootstrap intervals over queries.

    python bench/cascade_frontier.py DATA_DIR [--cache reports/cascade/minilm_dl19.json] [--job]

The LLM stage is DeepSeek-V3's recorded UMBRELA grades (``umbrela_dsv3.qrels``), the cheap
stage ``local:minilm`` (scores from ``bench/_minilm_cache.py``). Rules, each at a budget of
half of the pairs:

- ``llm``: every pair sent;
- ``top half per query``: each query's top 50% by the encoder's score sent, the rest settled
  in the lowest tier (nothing fitted: the budget is the share);
- ``frontier``: :func:`evidex.evaluate.cascade_frontier.frontier_sent`, ``start`` and
  ``step`` fitted on the other half (:func:`~evidex.evaluate.cascade_frontier.fit_frontier`)
  to agree with the LLM's own labels (the default), and, for comparison, with the gold labels.

Seed 0 is the split of ``bench/cascade_out_of_set.py``; ``--splits`` more seeded splits say
how much the verdict depends on the split.

``--job`` checks that the shipped code does what was measured: the rule fitted to the LLM on
each half routes the real tier job (``CascadeJudge`` with ``rule=frontier``, the harness and
its injection screen) over the other half's queries, run together so that they share one
budget, the LLM stage being ``bench/_loopback_judge.py`` serving the recorded grades on
loopback (as in ``bench/cascade_dl19.py``). Its kappa and share sent are put beside the
figures computed from the recorded verdicts.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _minilm_cache import cached_scores, key
from _report import write_section
from evidex.evaluate import metrics as m
from evidex.evaluate.cascade_frontier import RecordedPairs, frontier_out_of_set, query_split
from evidex.evaluate.datasets import trec_dl_tier
from evidex.evaluate.golden import TierGolden
from evidex.frontier import FrontierRule
from evidex.types import DEFAULT_TIERS

BUDGET = 0.5
N = len(DEFAULT_TIERS.names)
NAMES = [str(i) for i in range(N)]


def load(
    data: Path, records: Sequence[TierGolden], scores: dict[str, float]
) -> tuple[list[str], list[float], list[int], list[int]]:
    llm = {}
    for line in (data / "umbrela_dsv3.qrels").read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4:
            llm[(parts[0], parts[2])] = int(parts[3])
    names = list(DEFAULT_TIERS.names)
    return (
        [r.group for r in records],
        [scores[key(r)] for r in records],
        [N - 1 - llm[(r.group, r.passage_id)] for r in records],  # grade 3 = label 0
        [names.index(r.tier) for r in records],
    )


def top_half(
    groups: Sequence[str],
    scores: Sequence[float],
    expensive: Sequence[int],
    gold: Sequence[int],
    report_on: set[str],
    samples: int,
) -> dict[str, Any]:
    by_query: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        if g in report_on:
            by_query.setdefault(g, []).append(i)
    units = []
    for idx in by_query.values():
        ranked = sorted(idx, key=lambda i: (-scores[i], i))
        went = set(ranked[: math.floor(BUDGET * len(idx) + 1e-9)])
        units.append(
            [(gold[i], expensive[i] if i in went else N - 1, expensive[i], i in went) for i in idx]
        )

    def kappa(picked: Sequence[list[tuple[int, int, int, bool]]], col: int = 1) -> float:
        flat = [r for u in picked for r in u]
        return m.cohen_kappa([NAMES[r[0]] for r in flat], [NAMES[r[col]] for r in flat], NAMES)

    k = m.bootstrap_ci(units, kappa, samples=samples)
    d = m.bootstrap_ci(units, lambda u: kappa(u) - kappa(u, 2), samples=samples)
    rows = [r for u in units for r in u]
    return {
        "kappa": k.value,
        "kappa_interval": (k.low, k.high),
        "kappa_expensive": kappa(units, 2),
        "kappa_minus_expensive": d.value,
        "kappa_minus_expensive_interval": (d.low, d.high),
        "share_sent": sum(r[3] for r in rows) / len(rows),
    }


def row(rule: str, direction: str, f: dict[str, Any], notes: str = "") -> str:
    lo, hi = f["kappa_interval"]
    dlo, dhi = f["kappa_minus_expensive_interval"]
    met = f["kappa_minus_expensive"] >= -0.02 and f["share_sent"] <= BUDGET + 1e-9
    return (
        f"| {rule} | {direction} | {f['kappa']:.3f} ({lo:.3f}–{hi:.3f}) | "
        f"{f['kappa_expensive']:.3f} | {f['kappa_minus_expensive']:+.3f} ({dlo:+.3f} to "
        f"{dhi:+.3f}) | {f['share_sent']:.1%} | {'yes' if met else 'no'} | {notes} |"
    )


async def through_the_job(
    data: Path,
    records: Sequence[TierGolden],
    scores: dict[str, float],
    folds: Sequence[dict[str, Any]],
    directions: Sequence[str],
) -> list[str]:
    """Table rows: each fold's fitted rule run by the tier job, beside the recorded figures."""
    from api_path import LoopbackJudgeServer
    from cascade_dl19 import LLM, ReplayedMiniLM, run_tier
    from evidex.judges import get_judge
    from evidex.judges.cascade import CascadeJudge

    cheap = ReplayedMiniLM(records, scores)
    server = LoopbackJudgeServer(
        0, "--grades", str(data / "umbrela_dsv3.qrels"), "--queries", str(data / "queries.tsv")
    )
    llm = get_judge(LLM, base_url=server.base_url, api_key="recorded")
    rows = []
    try:
        for direction, fold in zip(directions, folds, strict=True):
            queries = set(fold["measured_queries"])
            held = [r for r in records if r.group in queries]
            rule = FrontierRule(budget=BUDGET, start=fold["start"], step=fold["step"])
            judge = CascadeJudge(cheap, llm, frontier=rule, frontier_source="fit half")
            live = cheap.scored_live
            point = await run_tier(judge, held, "frontier", max_concurrency=len(queries))
            rows.append(
                f"| {direction} | {len(queries)} | {fold['kappa']:.3f} | {point.kappa:.3f} | "
                f"{point.kappa - fold['kappa']:+.3f} | {fold['share_sent']:.1%} | "
                f"{point.share:.1%} | {point.llm_calls} | {point.fallbacks} | "
                f"{cheap.scored_live - live} | {point.seconds:.1f} |"
            )
            print(rows[-1], file=sys.stderr)
    finally:
        await llm.aclose()
        server.stop()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--cache", type=Path, default=Path("reports/cascade/minilm_dl19.json"))
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument(
        "--job", action="store_true", help="also run the fitted rules through the tier job"
    )
    args = parser.parse_args(argv)
    records = trec_dl_tier(args.data)
    cached = cached_scores(records, args.cache)
    groups, scores, expensive, gold = load(args.data, records, cached)
    lines = [
        "| rule | direction | kappa (95% CI) | LLM alone | kappa − LLM (95% CI) | sent | "
        "within 0.02, ≤ 50% | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    first, second = query_split(groups, 0)
    pairs = RecordedPairs(groups, scores, expensive, gold, N)
    directions = ("fit A, measure B", "fit B, measure A")
    for direction, report_on in zip(directions, (second, first), strict=True):
        f = top_half(groups, scores, expensive, gold, report_on, 1000)
        lines.append(row("top half per query", direction, f, "nothing fitted"))
    job_rows: list[str] = []
    targets = {"expensive": "frontier, fitted to the LLM", "gold": "frontier, fitted to NIST"}
    for target, name in targets.items():
        found = frontier_out_of_set(pairs, budget=BUDGET, target=target, per_query=True)
        for direction, fold in zip(directions, found["folds"], strict=True):
            notes = f"start {fold['start']}, step {fold['step']}"
            lines.append(row(name, direction, fold, notes))
        lines.append(row(name, "both halves pooled", found["pooled"]))
        alone = found["per_query"]
        for direction, fold in zip(directions, alone["folds"], strict=True):
            notes = f"start {fold['start']}, step {fold['step']}; each query alone"
            lines.append(row(f"{name}, per query", direction, fold, notes))
        lines.append(row(f"{name}, per query", "both halves pooled", alone["pooled"]))
        if target == "expensive" and args.job:
            job_rows = asyncio.run(
                through_the_job(args.data, records, cached, found["folds"], directions)
            )
    summary, split_rows = [], []
    for target, name in targets.items():
        deltas = []
        for seed in range(1, args.splits + 1):
            other = frontier_out_of_set(pairs, budget=BUDGET, seed=seed, samples=50, target=target)
            deltas.append([fold["kappa_minus_expensive"] for fold in other["folds"]])
            if seed <= 10:
                split_rows.append(
                    f"| {name} | {seed} | {deltas[-1][0]:+.3f} | {deltas[-1][1]:+.3f} | "
                    + " / ".join(f"({f['start']}, {f['step']})" for f in other["folds"])
                    + " |"
                )
        worst = sorted(min(d) for d in deltas)
        both = sum(w >= -0.02 for w in worst)
        mean = sum(sum(d) for d in deltas) / (2 * len(deltas))
        summary.append(
            f"| {name} | {len(deltas)} | {both} ({both / len(deltas):.0%}) | {mean:+.4f} | "
            f"{worst[len(worst) // 2]:+.3f} | {worst[len(worst) // 10]:+.3f} |"
        )
        print(f"{name}: within 0.02 both ways on {both} of {len(deltas)}", file=sys.stderr)
    body = (
        f"TREC DL 2019, {len(groups)} judged pairs, 43 queries in two seeded halves (seed 0, "
        "the split of `cascade_out_of_set`; A 21 queries, B 22); every rule is fitted on one "
        "half and measured on the other, whole queries on each side. LLM stage: DeepSeek-V3's "
        "recorded UMBRELA grades; cheap stage: `local:minilm`. Budget 50% of the pairs, held "
        "by construction. *Frontier*: each query's top `start` share by the encoder's score "
        "goes to the LLM; then, one `step` share at a time, the query whose last-sent step the "
        "LLM graded relevant (any grade above 0) most often gets its next passages, until the "
        "budget is spent; the rest is settled as irrelevant (the encoder never settles an upper "
        "grade). It pools the budget over the run's queries and reads the LLM's verdicts on "
        "them (an online check on the current queries, no random audit share: the check is the "
        "last step sent). `start` and `step` are fitted on the other half, to agree with the "
        "LLM's own labels (what the rule is for: losing as little as it can against the LLM) "
        "or, for comparison, with NIST's. Kappa: Cohen's, four grades, unweighted, against "
        "NIST; intervals: 95%, 1000 bootstrap resamples of the held-out queries (the "
        "difference resampled jointly). *Per query*: the same fitted rule with each held-out "
        "query's budget its own (what one `evidex tier` call a query gets: the cascade judge "
        "routes the tier job this way under `rule=frontier`).\n\n"
        + "\n".join(lines)
        + f"\n\n**Other seeded splits** ({args.splits} more, both directions each): how often "
        "the rule stays within 0.02 of the LLM in both directions, the mean difference, and the "
        "median and 10th percentile of the worse direction.\n\n"
        "| fitted to | splits | within 0.02 both ways | mean kappa − LLM | worse direction: "
        "median | worse direction: 10th percentile |\n|---|---|---|---|---|---|\n"
        + "\n".join(summary)
        + "\n\nThe first ten of them (kappa − LLM per direction, fitted start / step):\n\n"
        "| fitted to | seed | fit on first half | fit on second half | start, step |\n"
        "|---|---|---|---|---|\n" + "\n".join(split_rows)
    )
    if job_rows:
        body += (
            "\n\n**Through the tier job** (`--job`): the rule fitted to the LLM on one half "
            "routes the real tier job (`CascadeJudge`, `rule=frontier`, harness and injection "
            "screen included) over the other half's queries, run together in one pool "
            "(`max_concurrency` = the half's queries), the LLM stage a loopback server replaying "
            "the recorded grades. *Live-scored*: passages the injection screen rewrote, scored "
            "by the real encoder instead of the cache.\n\n"
            "| direction | queries | kappa, recorded | kappa, job | job − recorded | sent, "
            "recorded | sent, job | LLM calls | fallbacks | live-scored | seconds |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(job_rows)
        )
    print(body)
    write_section("cascade_frontier", "Cascade frontier rule out of set (TREC DL 2019)", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
