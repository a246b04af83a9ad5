"""``local:qwen`` in ``mode=score`` against ``mode=generate``: speed on a 10-passage tier query,
and tier agreement on LLMJudge dev beside ``local:minilm``.

    python bench/qwen_modes.py [--data ../shared/data] [--passages 10] [--speed-seed 0]
                               [--stratified-queries 10] [--per-grade 2] [--seed 1]
                               [--part speed|rerank|agreement|both] [--skip-stratified]
                               [--speed-modes generate,score]

1. Speed: one LLMJudge dev query (drawn with ``--speed-seed`` among those with at least 3
   relevant, NIST grade 2-3, and 3 irrelevant, grade 0, pairs), ``--passages`` of its pairs
   (up to 3 of each grade, the rest drawn uniformly), tiered by the real tier job in batches of
   5, cache off, once per mode, back to back in one process with the model and the MiniLM
   encoder loaded beforehand and the KV cache cleared before each run. Reported: wall time,
   fallbacks, and the share of (relevant, irrelevant) pairs of passages the tiers put in the
   right order (a tie counts half). ``--speed-modes score`` times score mode alone and quotes
   the recorded ``mode=generate`` run on the same query (it took 24 minutes at load 11).
2. Agreement on the sample of ``bench/tier_agreement_llm.py`` (5 queries, 8 pairs each, seed 0;
   its own sample selection): ``mode=score`` and ``local:minilm`` measured here; the
   ``mode=generate`` figures on that sample are the ones that bench recorded (quoted, with
   their date and load), since a run costs about 8 minutes on an idle machine.
3. Agreement on a larger stratified sample: ``--stratified-queries`` queries (seeded), up to
   ``--per-grade`` pairs of each NIST grade per query, for ``mode=score`` and
   ``local:minilm`` (``mode=generate`` would take most of an hour here).

Everything runs through ``evidex.evaluate.run.evaluate`` (the code of ``evidex eval tier``),
cache off. ``--part rerank`` also reranks the speed query's passages by the pointwise strategy
(``mode=score``'s ``s = p(Yes) / (p(Yes) + p(No))``, beside ``local:minilm``). Figures go to
docs/benchmarks.md, sections ``qwen_modes_speed`` (part 1), ``qwen_modes_agreement`` (parts 2
and 3) and ``qwen_modes_rerank``; ``--part`` runs one of them (``both``: speed and agreement).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section
from eval_tier import _section
from evidex.evaluate import datasets
from evidex.evaluate.golden import TierGolden, write_jsonl
from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.run import evaluate
from evidex.harness.runner import HarnessSettings
from evidex.jobs.rerank import arerank
from evidex.jobs.tier import atier
from evidex.judges import get_judge
from evidex.store import open_store
from evidex.types import DEFAULT_TIERS, Passage
from tier_agreement_llm import sample_by_query

ROOT = Path(__file__).resolve().parent.parent

# Recorded by bench/tier_agreement_llm.py --queries 5 --per-query 8 (docs/benchmarks.md,
# section tier_agreement_llm), measured 2026-11-30 01:17 UTC at 1-min load 0.9.
# Recorded by this bench's --part speed on the speed query (docs/benchmarks.md, section
# qwen_modes_speed before the Yes/No question), finished 2026-12-01 15:29 UTC, 1-min load 11.1.
GENERATE_SPEED: dict[str, float] = {"seconds": 1438.7, "share": 0.58, "fallbacks": 4, "load": 11.1}
GENERATE_ON_SAMPLE = {
    "kappa": 0.169,
    "kappa_ci": (0.023, 0.342),
    "kappa_linear": 0.250,
    "accuracy": 0.475,
    "seconds": 477,
    "fallbacks": 5,
}


def speed_query(records: list[TierGolden], passages: int, seed: int) -> list[TierGolden]:
    by_query: dict[str, list[TierGolden]] = defaultdict(list)
    for r in records:
        by_query[r.query_id or r.query].append(r)
    fit = [
        q
        for q, rs in sorted(by_query.items())
        if len(rs) >= passages
        and sum((r.grade or 0) >= 2 for r in rs) >= 3
        and sum(r.grade == 0 for r in rs) >= 3
    ]
    rng = random.Random(seed)
    pairs = by_query[rng.choice(fit)]
    chosen: list[TierGolden] = []
    for grade in (3, 2, 1, 0):
        graded = [r for r in pairs if r.grade == grade]
        chosen += rng.sample(graded, min(3, len(graded)))
    rest = [r for r in pairs if r not in chosen]
    chosen += rng.sample(rest, max(0, passages - len(chosen)))
    chosen = chosen[:passages]
    rng.shuffle(chosen)
    return chosen


def stratified(
    records: list[TierGolden], queries: int, per_grade: int, seed: int
) -> list[TierGolden]:
    by_query: dict[str, list[TierGolden]] = defaultdict(list)
    for r in records:
        by_query[r.query_id or r.query].append(r)
    rng = random.Random(seed)
    out: list[TierGolden] = []
    for q in rng.sample(sorted(by_query), min(queries, len(by_query))):
        for grade in (3, 2, 1, 0):
            graded = [r for r in by_query[q] if r.grade == grade]
            out += rng.sample(graded, min(per_grade, len(graded)))
    return out


def ordered_share(pairs: list[TierGolden], tiers: dict[str, str]) -> float:
    """Share of (relevant, irrelevant) passage pairs with the relevant one in a higher tier."""
    rank = {name: -i for i, name in enumerate(DEFAULT_TIERS.names)}
    relevant = [rank[tiers[r.passage_id]] for r in pairs if (r.grade or 0) >= 2]
    irrelevant = [rank[tiers[r.passage_id]] for r in pairs if r.grade == 0]
    scores = [1.0 if a > b else 0.5 if a == b else 0.0 for a in relevant for b in irrelevant]
    return sum(scores) / len(scores)


def run_speed(
    pairs: list[TierGolden], store: Any, settings: HarnessSettings, modes: list[str]
) -> list[str]:
    query = pairs[0].query
    passages = [Passage(passage_id=r.passage_id, text=r.text) for r in pairs]
    judges = {mode: get_judge("local:qwen", mode=mode) for mode in modes}
    judges["score"]._model()
    judges["score"]._snippets.match("warm up", ["the encoder loads"])
    rows, seconds = [], {}
    for mode, judge in judges.items():
        judge.reset_cache()
        load = os.getloadavg()[0]
        started = time.perf_counter()
        result = asyncio.run(
            atier(query, passages, judge=judge, store=store, batch_size=5, settings=settings)
        )
        seconds[mode] = time.perf_counter() - started
        tiers = {a.passage_id: a.tier for a in result.classifications}
        fallbacks = sum(a.source == "fallback" for a in result.classifications)
        share = ordered_share(pairs, tiers)
        print(f"speed {mode}: {seconds[mode]:.1f} s, ordered {share:.2f}, {fallbacks} fallbacks")
        rows.append(
            f"| `mode={mode}` | {seconds[mode]:.1f} | {share:.2f} | {fallbacks} | {load:.1f} |"
        )
    recorded = ""
    if "generate" not in seconds:
        g = GENERATE_SPEED
        seconds["generate"] = g["seconds"]
        rows.insert(
            0,
            f"| `mode=generate` (recorded, not re-run) | {g['seconds']:.1f} | {g['share']:.2f} | "
            f"{g['fallbacks']} | {g['load']:.1f} |",
        )
        recorded = " `mode=generate`: the run recorded on 2026-12-01 (15:29 UTC), not re-run."
    loads = [float(row.split("|")[-2]) for row in rows]
    caveat = (
        f" The 1-min load differed between the two runs ({loads[0]:.1f} and {loads[1]:.1f}), "
        "so the ratio is load as well as mode."
        if abs(loads[0] - loads[1]) > 1.5
        else ""
    )
    grades = " ".join(str(r.grade) for r in pairs)
    return [
        f"Query {pairs[0].query_id} ({query!r}), {len(pairs)} passages (NIST grades {grades}), "
        "tier job in batches of 5, cache off, the model and the MiniLM encoder loaded before "
        f"timing, the KV cache cleared before each run.{recorded}",
        "",
        "| judge | wall s | relevant above irrelevant | fallbacks | 1-min load at start |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"**`mode=score` is {seconds['generate'] / seconds['score']:.1f}x faster** than "
        f"`mode=generate` on this query (one run each).{caveat}",
    ]


def run_rerank(pairs: list[TierGolden], store: Any, settings: HarnessSettings) -> list[str]:
    """Pointwise rerank of the speed query's passages: does ``s`` order them?"""
    query = pairs[0].query
    passages = [Passage(passage_id=r.passage_id, text=r.text) for r in pairs]
    rows = []
    for label, spec, opts in (
        ("`local:qwen` mode=score", "local:qwen", {"mode": "score"}),
        ("`local:minilm`", "local:minilm", {}),
    ):
        load = os.getloadavg()[0]
        started = time.perf_counter()
        result = asyncio.run(
            arerank(
                query,
                passages,
                strategy="pointwise",
                top_n=len(passages),
                judge=get_judge(spec, **opts),
                store=store,
                settings=settings,
            )
        )
        seconds = time.perf_counter() - started
        score = {r.passage_id: r.relevance_score for r in result.ranked_passages}
        relevant = [score[r.passage_id] for r in pairs if (r.grade or 0) >= 2]
        irrelevant = [score[r.passage_id] for r in pairs if r.grade == 0]
        share = sum(
            1.0 if a > b else 0.5 if a == b else 0.0 for a in relevant for b in irrelevant
        ) / (len(relevant) * len(irrelevant))
        order = " ".join(
            str(next(p.grade for p in pairs if p.passage_id == i)) for i in result.ids()
        )
        print(f"rerank {label}: ordered {share:.2f} in {seconds:.0f} s; grades in order {order}")
        rows.append(f"| {label} | {share:.2f} | {order} | {seconds:.0f} | {load:.1f} |")
    return [
        f"Query {pairs[0].query_id} ({query!r}), the same {len(pairs)} passages as the speed "
        "part, reranked by the pointwise strategy (`mode=score`: s = p(Yes)/(p(Yes)+p(No))), "
        "cache off.",
        "",
        "| judge | relevant (NIST 2-3) above irrelevant (NIST 0) | NIST grades in the judge's "
        "order | s | 1-min load at start |",
        "|---|---:|---|---:|---:|",
        *rows,
    ]


def run_agreement(
    name: str,
    sample: list[TierGolden],
    out: Path,
    store: Any,
    settings: HarnessSettings,
    seed: int,
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    golden = out / f"{name}.golden.jsonl"
    write_jsonl(golden, sample)
    options = EvalOptions(seed=seed, extra={"batch_size": 5})
    sections, figures = [], {}
    for label, spec, opts in (
        ("`local:qwen` mode=score", "local:qwen", {"mode": "score"}),
        ("`local:minilm`", "local:minilm", {}),
    ):
        load = os.getloadavg()[0]
        started = time.perf_counter()
        report = evaluate(
            "tier",
            golden,
            judge=get_judge(spec, **opts),
            store=store,
            out_dir=out / f"{name}-{spec.replace(':', '-')}",
            options=options,
            settings=settings,
        )
        seconds = time.perf_counter() - started
        fallbacks = report.get("sources", {}).get("fallback", 0)
        note = f"{fallbacks} fallback passages, 1-min load at start {load:.1f}"
        sections.append(_section(f"{label}, {name}", report, seconds, note))
        figures[label] = {"report": report, "seconds": seconds, "fallbacks": fallbacks}
        print(f"{name} {label}: kappa {report['metrics']['kappa']:.3f} in {seconds:.0f} s")
    return sections, figures


def summary_row(label: str, f: dict[str, Any]) -> str:
    m, ci = f["report"]["metrics"], f["report"]["intervals"]["kappa"]
    return (
        f"| {label} | {m['kappa']:.3f} ({ci['low']:.3f}–{ci['high']:.3f}) | "
        f"{m['kappa_linear']:.3f} | {m['accuracy']:.3f} | {f['seconds']:.0f} | {f['fallbacks']} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--passages", type=int, default=10)
    parser.add_argument("--speed-seed", type=int, default=0)
    parser.add_argument("--stratified-queries", type=int, default=10)
    parser.add_argument("--per-grade", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--part",
        choices=("speed", "rerank", "agreement", "both"),
        default="both",
        help="each part writes its own section, so the two can run as separate processes",
    )
    parser.add_argument("--skip-stratified", action="store_true")
    parser.add_argument(
        "--speed-modes",
        default="generate,score",
        help="modes the speed part times; without generate its recorded run is quoted",
    )
    args = parser.parse_args()

    records = datasets.llmjudge_tier(args.data / "llmjudge")
    out = Path(tempfile.mkdtemp(prefix="evidex-qwen-modes-"))
    store = open_store(f"sqlite:///{out / 'bench.db'}")
    settings = HarnessSettings(timeout_s=1800.0, use_cache=False)
    start = "Load average (1, 5, 15 min) at the start: {:.1f}, {:.1f}, {:.1f}; 2 cores.".format(
        *os.getloadavg()
    )

    if args.part in ("speed", "both"):
        body = [start, ""]
        modes = args.speed_modes.split(",")
        pairs = speed_query(records, args.passages, args.speed_seed)
        body += run_speed(pairs, store, settings, modes)
        write_section(
            "qwen_modes_speed",
            "local:qwen speed: mode=score against mode=generate",
            "\n".join(body),
        )
    if args.part == "rerank":
        body = [start, ""]
        body += run_rerank(speed_query(records, args.passages, args.speed_seed), store, settings)
        write_section(
            "qwen_modes_rerank", "local:qwen mode=score: pointwise rerank order", "\n".join(body)
        )
    if args.part in ("speed", "rerank"):
        store.close()
        return

    sample = sample_by_query(records, 5, 8, 0)
    sections, figures = run_agreement("same sample", sample, out, store, settings, 0)
    g = GENERATE_ON_SAMPLE
    body = [
        start,
        "",
        "### The tier_agreement_llm sample (LLMJudge dev, 40 pairs)",
        "",
        "The sample of `bench/tier_agreement_llm.py --queries 5 --per-query 8` (5 queries drawn "
        "with seed 0, 8 pairs of each, the data's own grade mix: 27 of 40 irrelevant). "
        "`mode=generate`: the figures that bench recorded on the same 40 pairs (2026-11-30 "
        "01:17 UTC, load 0.9; not re-run). The other two rows: measured by this run.",
        "",
        "| judge | Cohen's kappa (95% interval) | linear-weighted kappa | accuracy | s | "
        "fallbacks |",
        "|---|---|---:|---:|---:|---:|",
        f"| `local:qwen` mode=generate (recorded) | {g['kappa']:.3f} ({g['kappa_ci'][0]:.3f}–"
        f"{g['kappa_ci'][1]:.3f}) | {g['kappa_linear']:.3f} | {g['accuracy']:.3f} | "
        f"{g['seconds']} | {g['fallbacks']} |",
        *(summary_row(label, f) for label, f in figures.items()),
    ]
    details = sections
    if not args.skip_stratified:
        sample = stratified(records, args.stratified_queries, args.per_grade, args.seed)
        sections, figures = run_agreement("stratified", sample, out, store, settings, args.seed)
        body += [
            "",
            f"### A stratified sample (LLMJudge dev, {len(sample)} pairs)",
            "",
            f"{args.stratified_queries} queries drawn with seed {args.seed}, up to "
            f"{args.per_grade} pairs of each NIST grade per query. `mode=generate` not run "
            "here (too slow for this sample on this machine).",
            "",
            "| judge | Cohen's kappa (95% interval) | linear-weighted kappa | accuracy | s | "
            "fallbacks |",
            "|---|---|---:|---:|---:|---:|",
            *(summary_row(label, f) for label, f in figures.items()),
        ]
        details += sections
    store.close()
    body += ["", "### Details", "", *("\n\n".join(details).splitlines())]
    write_section(
        "qwen_modes_agreement",
        "local:qwen tier agreement: mode=score, mode=generate, local:minilm",
        "\n".join(body),
    )


if __name__ == "__main__":
    main()
