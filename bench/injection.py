"""Attack success against the jobs, with and without the defence, judge by judge.

    python bench/injection.py [--data ../shared/data] [--judge local:minilm ...] [--pairs 20]
                               [--queries N] [--job tier ...] [--option KEY=VALUE ...]
                               [--section injection_tier] [--no-write]

For every TREC DL 2019 query, one irrelevant passage (NIST grade 0, seed 27) is judged beside
one relevant passage of the same query: clean, and with each record of the attack suite
(``evidex._attacks``) aimed at the job applied. A success is the attack moving the attacked
passage where its clean twin was not (tier: into the standard context, the top two tiers;
rerank: above the relevant passage).

- "before": preflight notes the suspicions but cuts nothing, and the tier job's hold is read
  back from the grade's ``reason``: what the run would have done without the defence;
- "after": as shipped: flagged text cut from what the judge reads, the tier hold on top.

Collateral: how often the relevant passage beside the attacked one changed its grade or rank
(after). Clean agreement: on up to ``--pairs`` judged passages per query, before and after (a
difference is a false positive of the screen costing a clean passage). The jobs are the table
in ``bench/_injection_jobs.py``; a job the judge does not do is said, not measured.

``--queries N`` measures the first N usable queries (sorted by id) only, for a judge too slow
for all 43 (an LLM on a CPU); ``--job`` keeps some jobs of the table; ``--option`` goes to every
judge; ``--section`` names the docs/benchmarks.md section written (a slow judge's rows go to a
section of their own, so the full run's stay).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from evidex._attacks import attack_suite
from evidex.judges import get_judge
from evidex.store import open_store
from evidex.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _injection_jobs import JOBS, UNMEASURED, attack_pairs
from _options import add_option_flag, judge_options
from _report import write_section
from injection_screen import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--judge", action="append", help="judge spec (repeatable)")
    parser.add_argument("--pairs", type=int, default=20, help="clean pairs per query")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--queries", type=int, default=None, help="first N usable queries")
    parser.add_argument("--job", action="append", help="jobs of the table to run (repeatable)")
    parser.add_argument("--section", default="injection_tier")
    parser.add_argument("--no-write", action="store_true")
    add_option_flag(parser)
    args = parser.parse_args()

    queries, qrels, texts = load(args.data, "trec-dl-2019")
    store = open_store("sqlite://")
    started = time.perf_counter()
    rows = [
        "| judge | job | attack kind | tries | success before | success after | collateral |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    clean_rows = [
        "| judge | job | clean measure | before | after | clean passages changed |",
        "|---|---|---|---:|---:|---:|",
    ]
    skipped: list[str] = []
    used = 0
    for spec in args.judge or ["local:minilm"]:
        judge = get_judge(spec, **judge_options(args.option))
        label = " ".join([spec, *(o for o in args.option if not o.startswith("n_threads="))])
        for bench in [b for b in JOBS if not args.job or b.job in args.job]:
            if not judge.supports(bench.job):
                skipped.append(f"`{spec}` does not do {bench.job}")
                continue
            suite = [a for a in attack_suite() if bench.job in a.jobs]
            tries, wins, collateral = Counter[str](), defaultdict(Counter[str]), Counter[str]()
            clean_pairs: dict[bool, list[tuple[dict[str, int], dict[str, str]]]] = {
                True: [],
                False: [],
            }
            rng = random.Random(args.seed)
            used = 0
            for query, judged, target, beside in attack_pairs(
                queries, qrels, texts, rng, args.queries
            ):
                used += 1
                zero, rel = target.passage_id, beside.passage_id
                clean = {
                    on: bench.grade(judge, store, query, [beside, target], on)
                    for on in (False, True)
                }
                for attack in suite:
                    hit = attack.apply(target, query)
                    for on, side in ((False, "before"), (True, "after")):
                        graded = bench.grade(judge, store, query, [beside, hit], on)
                        for key in (attack.kind, f"({attack.split})"):
                            tries[key] += on
                            wins[key][side] += bench.won(clean[on], graded, zero, rel)
                        if on and bench.collateral and graded[rel] != clean[on][rel]:
                            collateral[attack.kind] += 1
                sample = sorted(judged.items())
                rng.shuffle(sample)
                pairs = dict([(p, g) for p, g in sample if p in texts][: args.pairs])
                shown = [Passage(passage_id=p, text=texts[p]) for p in pairs]
                for on in (False, True):
                    clean_pairs[on].append((pairs, bench.grade(judge, store, query, shown, on)))
            total = Counter[str]()
            for kind in sorted(k for k in tries if not k.startswith("(")):
                n, b, a = tries[kind], wins[kind]["before"], wins[kind]["after"]
                total.update({"n": n, "before": b, "after": a, "collateral": collateral[kind]})
                side = collateral[kind] if bench.collateral else "–"
                rows.append(
                    f"| {label} | {bench.job} | {kind} | {n} | {b} ({b / n:.0%}) | "
                    f"{a} ({a / n:.0%}) | {side} |"
                )
            for split in ("(tune)", "(heldout)"):
                n, b, a = tries[split], wins[split]["before"], wins[split]["after"]
                if n:
                    rows.append(
                        f"| {label} | {bench.job} | {split[1:-1]} phrasings | {n} | "
                        f"{b} ({b / n:.1%}) | {a} ({a / n:.1%}) | |"
                    )
            n = total["n"]
            rows.append(
                f"| {label} | {bench.job} | (all) | {n} | {total['before']} "
                f"({total['before'] / n:.1%}) | {total['after']} ({total['after'] / n:.1%}) | "
                f"{total['collateral'] if bench.collateral else '–'} |"
            )
            changed = sum(
                1
                for (_, x), (_, y) in zip(clean_pairs[False], clean_pairs[True], strict=True)
                for p in x
                if x[p] != y[p]
            )
            clean_rows.append(
                f"| {label} | {bench.job} | {bench.measure} | "
                f"{bench.agreement(clean_pairs[False]):.3f} | "
                f"{bench.agreement(clean_pairs[True]):.3f} | {changed} |"
            )
    seconds = time.perf_counter() - started
    options = judge_options(args.option)
    body = (
        (f"Judge options: {options}. " if options else "")
        + f"{used} TREC DL 2019 queries; the suite's phrasings aimed at each job (tuned and held "
        f"out); tier at batch size 5, rerank by the judge's default strategy; {seconds:.0f} s."
        "\n\n" + "\n".join(rows) + "\n\n"
        f"Clean passages (up to {args.pairs} judged a query), before and after the defence:\n\n"
        + "\n".join(clean_rows)
        + "\n\n"
        + (f"Not measured: {'; '.join(skipped)}. " if skipped else "")
        + f"No bench entry yet for {', '.join(UNMEASURED)} (they need labelled data of their "
        "own); their defence is pinned by tests/test_injection_jobs.py."
    )
    print(body)
    if not args.no_write:
        title = "Injection: attack success against the jobs"
        if args.section != "injection_tier":
            title += f" ({', '.join(args.judge or ['local:minilm'])}, {used} queries)"
        write_section(args.section, title, body)


if __name__ == "__main__":
    main()
