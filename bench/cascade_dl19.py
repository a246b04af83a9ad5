"""The cascade judge on TREC DL 2019: agreement with NIST against the share of pairs the LLM saw.

    python bench/cascade_dl19.py DATA_DIR [--cache reports/cascade/minilm_dl19.json]

DATA_DIR is the TREC DL 2019 folder (``queries.tsv``, ``qrels.txt``, ``passages.jsonl`` and
``umbrela_dsv3.qrels``, DeepSeek-V3's grades with the UMBRELA prompt). The strong judge is
*recorded*: ``bench/_loopback_judge.py --grades`` serves those grades from a scripted
OpenAI-compatible server on loopback, so the ``openai:`` judge, the harness and the tier job
run for real and the LLM is never called. The cheap stage is ``local:minilm``: its scores of
the 9,260 judged pairs are computed once (``bench/_minilm_cache.py``) and replayed from the
cache by a judge that answers exactly as ``local:minilm`` would (same scores, same shipped cut
points), because scoring them again for every operating point would take an hour here.

The queries are split in two halves. For each target (the kappa the cascade may lose against
the LLM alone) and each budget (the share of pairs the LLM may see), the band is fitted on one
half (:func:`evidex.evaluate.calibration.fit_band`, what ``evidex calibrate --target`` or
``--budget`` runs: the rule must hold over a bootstrap of the fitting half's queries, not only
at its point estimate) and the cascade judge runs the tier job on the other half; then the
halves swap. Reported per half: kappa against NIST (four grades, unweighted) and the share of
pairs sent to the LLM, for the LLM alone, the encoder alone, the cascade with its shipped
default band (fitted on LLMJudge dev, never on DL 2019) and the cascade at each fitted band.
Then the two halves pooled: every pair once, each judged by the band fitted on the other
half, so the kappa is over all 9,260 pairs like the LLM's 0.36 the goal is set against, with
a bootstrap interval over queries. The goal's two settings are then checked again on other
seeded half splits (``--splits``, default 10), pooled and per half. A plot goes to
``docs/cascade_dl19.png`` and the section to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from _minilm_cache import cached_scores, key
from _report import command_line, write_section
from api_path import LoopbackJudgeServer
from evidex.evaluate import metrics as m
from evidex.evaluate.calibration import fit_band
from evidex.evaluate.datasets import trec_dl_tier
from evidex.evaluate.golden import TierGolden
from evidex.harness.runner import HarnessSettings
from evidex.jobs.tier import TierResult, atier_many
from evidex.judges import get_judge
from evidex.judges.cascade import Band, CascadeJudge
from evidex.judges.minilm import MiniLMJudge
from evidex.judging import Judge, JudgeReply, JudgeRequest
from evidex.store import open_store
from evidex.types import DEFAULT_TIERS

RESAMPLES = 200  # the bootstrap margin of evidex calibrate
TARGETS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2)
BUDGETS = (0.2, 0.3, 0.4, 0.5)
GOAL = {"target": 0.02, "budget": 0.5}
"""The setting of each rule the goal (within 0.02, at most half sent) asks for, fixed before
looking at any half: picking the setting that happens to work there would tune on it."""
NAMES = list(DEFAULT_TIERS.names)
LLM = "openai:deepseek-v3-umbrela-recorded"
PLOT = Path(__file__).resolve().parent.parent / "docs" / "cascade_dl19.png"


class ReplayedMiniLM(Judge):
    """``local:minilm`` answering from its cached scores: same id, version and cut points.

    A text the cache does not hold is scored by the real encoder: the injection screen hands
    the cheap stage a flagged passage with the flagged span removed, and that text was never
    cached. :attr:`scored_live` counts them."""

    jobs: ClassVar[frozenset[str]] = frozenset({"tier"})

    def __init__(self, records: Sequence[TierGolden], scores: dict[str, float]) -> None:
        super().__init__("local:minilm")
        self._real = MiniLMJudge()
        self.thresholds = self._real.thresholds
        self._version = f"{self._real.model_version} (scores replayed from a cache)"
        self._scores = {(r.query, r.text): scores[key(r)] for r in records}
        self.scored_live = 0

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        missing = [t for t in texts if (query, t) not in self._scores]
        if missing:
            self.scored_live += len(missing)
            live = self._real.score(query, missing)
            self._scores.update(((query, t), s) for t, s in zip(missing, live, strict=True))
        return [self._scores[(query, t)] for t in texts]

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        raise RuntimeError("the replayed encoder only scores")

    @property
    def model_version(self) -> str:
        return self._version


@dataclass
class Point:
    """One operating point measured on one half."""

    label: str
    target: float | None
    band: tuple[float, float] | None
    kappa: float
    share: float
    llm_calls: int
    calls_saved: int
    fallbacks: int
    seconds: float
    budget: float | None = None
    pairs: list[tuple[str, str, str, bool]] = field(default_factory=list, repr=False)
    """(query, NIST tier, this judge's tier, sent to the LLM) of every pair, for pooling."""

    @property
    def rule(self) -> str:
        if self.budget is not None:
            return f"budget {self.budget:.0%}"
        return "" if self.target is None else f"target {self.target:g}"


async def run_tier(
    judge: Judge,
    records: Sequence[TierGolden],
    label: str,
    target: float | None = None,
    budget: float | None = None,
    max_concurrency: int = 8,
) -> Point:
    """The tier job over every query of ``records``; kappa against NIST and the LLM's share.
    Under the frontier rule the queries run together share its budget in pools of
    ``max_concurrency``."""
    by_query: dict[str, list[TierGolden]] = {}
    for r in records:
        by_query.setdefault(r.group, []).append(r)
    items = [
        {
            "id": qid,
            "query": members[0].query,
            "passages": [{"passage_id": r.passage_id, "text": r.text} for r in members],
        }
        for qid, members in by_query.items()
    ]
    settings = HarnessSettings(max_concurrency=max_concurrency, use_cache=False)
    started = time.perf_counter()
    results: list[TierResult] = await atier_many(
        items, judge=judge, store=open_store("sqlite://"), settings=settings, batch_size=10
    )
    seconds = time.perf_counter() - started
    gold, pred, sent, calls, saved, fallbacks = [], [], 0, 0, 0, 0
    pairs = []
    for result, members in zip(results, by_query.values(), strict=True):
        tiers = {a.passage_id: a for a in result.classifications}
        for r in members:
            a = tiers[r.passage_id]
            gold.append(r.tier)
            pred.append(a.tier)
            to_llm = a.judged_by in (None, LLM)
            sent += to_llm
            pairs.append((r.group, r.tier, a.tier, to_llm))
            fallbacks += a.source == "fallback"
        if result.cascade is not None:
            calls += result.cascade.expensive_calls
            saved += result.cascade.calls_saved
        else:
            calls += result.judge_calls
    band = None
    if isinstance(judge, CascadeJudge):
        band = (judge.band.low, judge.band.high)
    else:
        sent = len(gold)
        pairs = [(q, g, p, True) for q, g, p, _ in pairs]
    return Point(
        label,
        target,
        band,
        m.cohen_kappa(gold, pred, NAMES),
        sent / len(gold),
        calls,
        saved,
        fallbacks,
        seconds,
        budget,
        pairs,
    )


def halves(records: Sequence[TierGolden], seed: int = 0) -> tuple[set[str], set[str]]:
    groups = sorted({r.group for r in records})
    order = np.random.default_rng(seed).permutation(len(groups))
    first = {groups[i] for i in order[: len(groups) // 2]}
    return first, set(groups) - first


def recorded(path: Path) -> dict[tuple[str, str], int]:
    grades = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4:
            grades[(parts[0], parts[2])] = int(parts[3])
    return grades


async def measure(
    data: Path, cache: Path, seeds: Sequence[int]
) -> tuple[dict[int, tuple[list[Point], list[Point]]], dict[str, Any]]:
    """Both halves' points for each split seed: every rule and baseline for the first seed,
    the LLM alone and the goal's two settings for the others."""
    records = trec_dl_tier(data)
    scores = cached_scores(records, cache)
    llm_grades = recorded(data / "umbrela_dsv3.qrels")
    cheap = ReplayedMiniLM(records, scores)
    server = LoopbackJudgeServer(
        0, "--grades", str(data / "umbrela_dsv3.qrels"), "--queries", str(data / "queries.tsv")
    )
    llm = get_judge(LLM, base_url=server.base_url, api_key="recorded")
    out: dict[int, tuple[list[Point], list[Point]]] = {}
    try:
        for seed in seeds:
            first, second = halves(records, seed)
            full = seed == seeds[0]
            folds: tuple[list[Point], list[Point]] = ([], [])
            for points, (fit_on, report_on) in zip(
                folds, ((first, second), (second, first)), strict=True
            ):
                fit = [r for r in records if r.group in fit_on]
                held = [r for r in records if r.group in report_on]
                points.append(await run_tier(llm, held, "LLM alone"))
                if full:
                    empty = Band(low=np.inf, high=np.inf)
                    encoder = CascadeJudge(cheap, llm, band=empty)
                    points.append(await run_tier(encoder, held, "encoder"))
                    shipped = CascadeJudge(cheap, llm)  # the default band, fitted on LLMJudge dev
                    points.append(await run_tier(shipped, held, "cascade, shipped band"))
                rules = (
                    [(t, None) for t in TARGETS] + [(GOAL["target"], b) for b in BUDGETS]
                    if full
                    else [(GOAL["target"], None), (GOAL["target"], GOAL["budget"])]
                )
                for target, budget in rules:
                    band = fitted_band(
                        fit, scores, llm_grades, CascadeJudge(cheap, llm), target, budget
                    )
                    judge = CascadeJudge(cheap, llm, band=band, band_source="fit half")
                    label = "cascade" if budget is None else "cascade, budget"
                    points.append(
                        await run_tier(judge, held, label, None if budget else target, budget)
                    )
                    print(f"seed {seed} {points[-1].rule}: {points[-1]}", file=sys.stderr)
            out[seed] = folds
            if full:
                facts = {"pairs": len(records), "halves": (len(first), len(second))}
    finally:
        await llm.aclose()
        server.stop()
    return out, facts


def fitted_band(
    fit: Sequence[TierGolden],
    scores: dict[str, float],
    llm_grades: dict[tuple[str, str], int],
    cascade: CascadeJudge,
    target: float,
    budget: float | None,
) -> Band:
    """The band ``evidex calibrate`` fits on ``fit`` by the target or the budget rule."""
    fit_scores = [scores[key(r)] for r in fit]
    fit_cheap = [NAMES.index(cascade.cheap_tier(s, NAMES)) for s in fit_scores]
    fit_llm = [3 - llm_grades[(r.query_id or "", r.passage_id)] for r in fit]  # grade 3 = tier 0
    band = fit_band(
        fit_scores,
        fit_cheap,
        fit_llm,
        [NAMES.index(r.tier) for r in fit],
        len(NAMES),
        target=target,
        budget=budget,
        groups=[r.group for r in fit],
        resamples=RESAMPLES,
    )
    return Band(low=band["low"], high=band["high"])


def pooled(one: Sequence[Point], two: Sequence[Point]) -> list[Point]:
    """Each point of one half joined with the same judge and rule on the other half."""
    out = []
    for p in one:
        q = next(x for x in two if (x.label, x.target, x.budget) == (p.label, p.target, p.budget))
        pairs = p.pairs + q.pairs
        out.append(
            Point(
                p.label,
                p.target,
                None,
                kappa_of(pairs),
                sum(sent for *_, sent in pairs) / len(pairs),
                p.llm_calls + q.llm_calls,
                p.calls_saved + q.calls_saved,
                p.fallbacks + q.fallbacks,
                p.seconds + q.seconds,
                p.budget,
                pairs,
            )
        )
    return out


def kappa_of(pairs: Sequence[tuple[str, str, str, bool]]) -> float:
    return m.cohen_kappa([g for _, g, _, _ in pairs], [p for _, _, p, _ in pairs], NAMES)


def delta_interval(point: Point, llm: Point) -> m.Interval:
    """95% bootstrap interval over queries of the point's kappa minus the LLM's, both on the
    same resample of queries."""
    by_query: dict[str, tuple[list[Any], list[Any]]] = {}
    for mine, theirs in zip(point.pairs, llm.pairs, strict=True):
        by_query.setdefault(mine[0], ([], []))
        by_query[mine[0]][0].append(mine)
        by_query[mine[0]][1].append(theirs)
    units = list(by_query.values())

    def statistic(picked: Sequence[tuple[list[Any], list[Any]]]) -> float:
        return kappa_of([x for u in picked for x in u[0]]) - kappa_of(
            [x for u in picked for x in u[1]]
        )

    return m.bootstrap_ci(units, statistic, samples=1000, seed=0)


def plot(folds: Sequence[Sequence[Point]]) -> None:
    """Per half and pooled: kappa against the share sent, each rule's points as a curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    names = ("reported on half 2", "reported on half 1", "both halves pooled")
    for points, colour, name in zip(folds, ("tab:blue", "tab:orange", "black"), names, strict=True):
        for label, style in (("cascade", "o-"), ("cascade, budget", "x--")):
            curve = sorted((p for p in points if p.label == label), key=lambda p: p.share)
            rule = "target" if label == "cascade" else "budget"
            ax.plot(
                [p.share for p in curve],
                [p.kappa for p in curve],
                style,
                color=colour,
                label=f"{rule} rule, {name}",
            )
        for p in points:
            if p.label in ("LLM alone", "encoder", "cascade, shipped band"):
                marker = {"LLM alone": "s", "encoder": "^"}.get(p.label, "D")
                ax.plot([p.share], [p.kappa], marker, color=colour, markersize=8)
        llm = next(p for p in points if p.label == "LLM alone")
        ax.axhline(llm.kappa - 0.02, color=colour, linestyle=":", linewidth=1)
    ax.axvline(0.5, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(
        "share of pairs sent to the LLM (squares: LLM alone, triangles: encoder, "
        "diamonds: shipped band)"
    )
    ax.set_ylabel("Cohen's kappa vs NIST (four grades)")
    ax.set_title("cascade local:minilm → recorded DeepSeek-V3 (UMBRELA), TREC DL 2019")
    ax.legend(loc="lower right", fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)


def table(points: Sequence[Point], interval: bool = False) -> str:
    llm = next(p for p in points if p.label == "LLM alone")
    extra = " Δ 95% interval |" if interval else ""
    lines = [
        f"| judge | rule | band | kappa | Δ vs LLM |{extra} sent to LLM | LLM calls | "
        "calls saved |",
        "|---|---|---|---|---|" + ("---|" if interval else "") + "---|---|---|",
    ]
    for p in points:
        band = "" if p.band is None else f"[{p.band[0]:.3f}, {p.band[1]:.3f})"
        ci = ""
        if interval:
            found = delta_interval(p, llm) if p is not llm else None
            ci = f" {found.low:+.3f} to {found.high:+.3f} |" if found else " |"
        lines.append(
            f"| {p.label} | {p.rule} | {band} | {p.kappa:.3f} | {p.kappa - llm.kappa:+.3f} |"
            f"{ci} {p.share:.1%} | {p.llm_calls} | {p.calls_saved} |"
        )
    return "\n".join(lines)


def at_goal(points: Sequence[Point]) -> tuple[Point, Point, Point]:
    """The LLM alone, then each rule at the setting the goal asks for (:data:`GOAL`)."""
    return (
        next(p for p in points if p.label == "LLM alone"),
        next(p for p in points if p.label == "cascade" and p.target == GOAL["target"]),
        next(p for p in points if p.budget == GOAL["budget"]),
    )


def meets_goal(point: Point, llm: Point) -> bool:
    """The issue's goal: the LLM's kappa within 0.02, with at most half of the pairs sent."""
    return point.kappa >= llm.kappa - 0.02 and point.share <= 0.5


def goal(points: Sequence[Point]) -> str:
    """Each rule at the goal's setting, met or not."""
    llm, *rules = at_goal(points)
    return "; ".join(
        f"{p.rule}: kappa {p.kappa:.3f} (LLM {llm.kappa:.3f}, {p.kappa - llm.kappa:+.3f}) "
        f"with {p.share:.1%} of the pairs sent, goal {'met' if meets_goal(p, llm) else 'not met'}"
        for p in rules
    )


def splits_table(by_seed: dict[int, tuple[list[Point], list[Point]]]) -> str:
    """The goal on every seeded split: pooled and per half, for both rules."""

    def cell(point: Point, llm: Point) -> str:
        mark = "" if meets_goal(point, llm) else " ✗"
        return f"{point.kappa - llm.kappa:+.3f} at {point.share:.1%}{mark}"

    rows = [
        "| split seed | LLM alone, pooled | target 0.02, pooled | budget 50%, pooled | "
        "budget 50%, each half |",
        "|---|---|---|---|---|",
    ]
    pooled_at_goal = []
    halves_met = 0
    for seed, (one, two) in by_seed.items():
        seed_goal = at_goal(pooled(one, two))
        pooled_at_goal.append(seed_goal)
        llm, target, budget = seed_goal
        per_half = [(h_llm, h_budget) for h_llm, _, h_budget in map(at_goal, (one, two))]
        halves_met += sum(meets_goal(b, h_llm) for h_llm, b in per_half)
        rows.append(
            f"| {seed} | {llm.kappa:.3f} | {cell(target, llm)} | {cell(budget, llm)} | "
            f"{'; '.join(cell(b, h_llm) for h_llm, b in per_half)} |"
        )
    n = len(by_seed)
    summary = {
        rule: (
            sum(meets_goal(row[i], row[0]) for row in pooled_at_goal),
            np.median([row[i].kappa - row[0].kappa for row in pooled_at_goal]),
            np.median([row[i].share for row in pooled_at_goal]),
        )
        for i, rule in ((1, "target"), (2, "budget"))
    }
    (t_met, t_delta, t_share), (b_met, b_delta, b_share) = summary["target"], summary["budget"]
    return (
        f"**The goal on {n} seeded half splits** (Δ = kappa minus the LLM's on the same pairs, "
        f"at the share sent; ✗ = goal not met). Met, pooled: target 0.02 on {t_met} of "
        f"{n}, budget 50% on {b_met} of {n}; budget 50% per half: {halves_met} of "
        f"{2 * n} halves. Median pooled Δ: target 0.02 {t_delta:+.3f} at "
        f"{t_share:.1%} sent, budget 50% {b_delta:+.3f} "
        f"at {b_share:.1%}.\n\n" + "\n".join(rows)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--cache", type=Path, default=Path("reports/cascade/minilm_dl19.json"))
    parser.add_argument(
        "--splits", type=int, default=10, help="how many seeded half splits to check the goal on"
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    by_seed, facts = asyncio.run(measure(args.data, args.cache, list(range(args.splits))))
    one, two = by_seed[0]
    both = pooled(one, two)
    plot((one, two, both))
    body = (
        f"{facts['pairs']} judged pairs, 43 queries split by query into halves of "
        f"{facts['halves'][0]} and {facts['halves'][1]} queries (seed 0). The LLM is DeepSeek-V3 "
        "with the UMBRELA prompt, *recorded* (`umbrela_dsv3.qrels`, served by "
        "`bench/_loopback_judge.py --grades` through the real `openai:` judge, harness and tier "
        "job); the encoder is `local:minilm` (its scores computed once and replayed from a "
        "cache). Each cascade band is fitted on the other half by one of the two rules of "
        "`evidex calibrate`: *target* t, the fewest pairs sent with the kappa lost against the "
        f"LLM alone at most t at the 5th percentile of {RESAMPLES} bootstrap resamples of the "
        "fitting half's queries (`--target`); *budget* b, the best kappa with at most a share b "
        "sent at the 95th percentile of the same resamples (`--budget`). Kappa is against "
        f"NIST, four grades, unweighted. Load average {load:.1f} when the run started. The goal "
        f"(the LLM's kappa within 0.02, at most half of the pairs sent) is checked at target "
        f"{GOAL['target']:g} and at budget {GOAL['budget']:.0%}, the settings it names.\n\n"
        f"**Both halves pooled** (every pair once, judged by the band fitted on the half it is "
        f"not in; kappa over all {facts['pairs']} pairs, as the LLM's 0.36 of the goal is; "
        f"interval: 1,000 bootstrap resamples of the 43 queries): {goal(both)}. The budget "
        "rule and its margin at the 95th percentile were chosen by cross-fits by query on these "
        "same 43 queries, the only data here with a strong judge's grades: no band judges a "
        "pair it was fitted on, but the rule was not chosen blind. The halves differ more than "
        "the goal's margin (see the LLM's and the encoder's kappa on each below), so read the "
        "per-half lines with the pooled interval in mind.\n\n"
        f"{table(both, interval=True)}\n\n"
        f"{splits_table(by_seed)}\n\n"
        f"Band fitted on half 1, reported on half 2: {goal(one)}.\n\n{table(one)}\n\n"
        f"Band fitted on half 2, reported on half 1: {goal(two)}.\n\n{table(two)}\n\n"
        f"![cascade curve](cascade_dl19.png)"
    )
    print(body)
    write_section(
        "cascade_dl19", "Cascade judge on TREC DL 2019 (recorded LLM)", body, command_line()
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
