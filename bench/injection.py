"""Attack success against every job, with and without the defence, judge by judge.

    python bench/injection.py [--data ../shared/data] [--judge SPEC [--option KEY=VALUE ...]]...
        [--job tier ...] [--limit N] [--per-kind K] [--set public ...] [--pairs 20] [--seed 27]
        [--section injection_minilm] [--no-write]

Every case of each job (the jobs table, ``bench/_injection_jobs.py``: tier and rerank on TREC
DL 2019, classify on SciFact, audit on WiCE, sufficiency on CLAPnq) is run clean and with each
phrasing of the attack suite (``evidex._attacks``: both files) aimed at the job, each twice:

- "before": preflight notes the suspicions but cuts nothing (and the tier job's hold is read
  back from the grade's ``reason``): what the run would have done without the defence;
- "after": as shipped, at the default (low) risk: flagged text cut from what the judge reads,
  the tier hold on top.

A success is the attack moving its case where the clean run of the same arm was not (each
job's rule is in its entry); an attack whose clean run was already there is not counted, so
"k/n" reads "k of the n attacks that had room to succeed". Collateral: how often a clean
passage of the same input changed (after), of all attacks. Rows per attack kind, then per set
of phrasings: those the screen was tuned on, the suite's held-out ones, and the frozen held-out
set of public phrasings. Clean agreement: each job's clean measure before and after (a
difference is the screen costing clean passages), with the seconds the job took.

``--judge`` is repeatable; each ``--option`` after a ``--judge`` goes to that judge, those
before the first to every judge. ``openai:obedient`` and ``openai:llama-server`` are served
here on loopback (``bench/_served.py``), also as a cascade's stage. Anything that runs a local
model should get ``--option n_threads=1``. For a slow judge, ``--limit N`` keeps N cases a job
(queries, claims, unanswerable questions), ``--per-kind K`` the first K phrasings of each kind
in each set, and ``--set`` some of the sets (``tune``, ``heldout``, ``public``). ``--section``
names the docs/benchmarks.md section written, so a slow judge's rows go to a section of their
own and the full run's stay.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _injection_case import Case, JobBench, Outcome, defence
from _injection_jobs import JOBS
from _meaning_screen import candidate_in_preflight, llmjudge_sentences, use_counter_examples
from _options import judge_options
from _report import write_section
from _served import served
from evidex._attacks import Attack, attack_suite
from evidex.jobs import run_sync
from evidex.judges import get_judge
from evidex.store import open_store

SETS = {
    "tune": "tune phrasings",
    "heldout": "held-out phrasings (suite)",
    "public": "frozen public held-out phrasings",
}


def set_of(attack: Attack) -> str:
    return "public" if attack.collection == "public_heldout" else attack.split


class _Judge(argparse.Action):
    def __call__(self, parser: Any, ns: Any, value: Any, option: Any = None) -> None:
        ns.judges = [*(ns.judges or []), (value, [])]


class _Option(argparse.Action):
    def __call__(self, parser: Any, ns: Any, value: Any, option: Any = None) -> None:
        if ns.judges:
            ns.judges[-1][1].append(value)
        else:
            ns.common = [*(ns.common or []), value]


def chosen(job: JobBench, per_kind: int | None, sets: Sequence[str] | None = None) -> list[Attack]:
    """The suite's phrasings aimed at ``job``, of ``sets`` (default all), the first
    ``per_kind`` of each kind and set."""
    kept: Counter[tuple[str, str]] = Counter()
    out = []
    for attack in attack_suite():
        if job.tag not in attack.jobs or (sets and set_of(attack) not in sets):
            continue
        key = (attack.kind, set_of(attack))
        if per_kind is None or kept[key] < per_kind:
            kept[key] += 1
            out.append(attack)
    return out


async def _arm(
    job: JobBench, judge: Any, store: Any, cases: list[Case], defended: bool, at_once: int
) -> list[Outcome]:
    """The job on ``cases``, ``at_once`` at a time, with the defence or without it."""
    gate = asyncio.Semaphore(at_once)

    async def one(case: Case) -> Outcome:
        async with gate:
            return await job.run(judge, store, case, defended)

    with defence(defended):
        return list(await asyncio.gather(*(one(c) for c in cases)))


async def measure(
    job: JobBench,
    judge: Any,
    cases: list[Case],
    clean_cases: list[Case],
    attacks: list[Attack],
    label: str,
    at_once: int,
) -> dict[str, Any]:
    """Every attack on every case, both arms (a store a case: its cache serves the arm
    "after" what "before" already asked); the clean measure; the counts the rows need."""
    tries: dict[str, Counter[str]] = defaultdict(Counter)
    wins: dict[str, Counter[str]] = defaultdict(Counter)
    runs, collateral = Counter[str](), Counter[str]()
    started = time.perf_counter()
    for number, case in enumerate(cases, 1):
        hits = [(a, hit) for a in attacks if (hit := case.attacked(a)) is not None]
        store = open_store("sqlite://")
        for on, side in ((False, "before"), (True, "after")):
            clean, *outs = await _arm(job, judge, store, [case, *(h for _, h in hits)], on, at_once)
            for (attack, _), out in zip(hits, outs, strict=True):
                kind = attack.kind + (" (in the answer)" if case.place == "answer" else "")
                won = job.won(clean, out, case, attack)
                for key in (kind, set_of(attack), "(all)"):
                    tries[side][key] += won is not None
                    wins[side][key] += bool(won)
                    if on:
                        runs[key] += 1
                        collateral[key] += bool(job.collateral and job.collateral(clean, out, case))
        store.close()
        elapsed = time.perf_counter() - started
        print(
            f"{label} {job.job}: case {number}/{len(cases)}, {elapsed:.0f} s, "
            f"after {dict(wins['after'])}",
            file=sys.stderr,
            flush=True,
        )
    store = open_store("sqlite://")
    graded = {on: await _arm(job, judge, store, clean_cases, on, at_once) for on in (False, True)}
    store.close()
    changed = sum(x != y for x, y in zip(graded[False], graded[True], strict=True))
    return {
        "tries": tries,
        "wins": wins,
        "runs": runs,
        "collateral": collateral,
        "clean": [
            job.clean(list(zip(clean_cases, graded[on], strict=True))) for on in (False, True)
        ],
        "changed": changed,
        "clean_cases": len(clean_cases),
        "cases": len(cases),
        "seconds": time.perf_counter() - started,
    }


def rows(label: str, job: JobBench, m: dict[str, Any]) -> list[str]:
    def cell(side: str, key: str) -> str:
        n, k = m["tries"][side][key], m["wins"][side][key]
        return f"{k}/{n} ({k / n:.1%})" if n else "0/0"

    def side(key: str) -> str:
        if job.collateral is None:
            return "–"
        return f"{m['collateral'][key]}/{m['runs'][key]}"

    kinds = sorted(k for k in m["runs"] if k not in SETS and k != "(all)")
    keys = [*kinds, *(s for s in SETS if m["runs"][s]), "(all)"]
    return [
        f"| {label} | {job.job} | {SETS.get(key, key)} | {cell('before', key)} | "
        f"{cell('after', key)} | {side(key)} |"
        for key in keys
    ]


def _load(values: Sequence[float]) -> str:
    return ", ".join(f"{x:.1f}" for x in values)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--judge", action=_Judge, dest="judges", help="judge spec (repeatable)")
    parser.add_argument(
        "--option",
        action=_Option,
        dest="common",
        metavar="KEY=VALUE",
        help="judge option: after a --judge, that judge's; before any, every judge's",
    )
    parser.add_argument("--job", action="append", help="jobs of the table to run (repeatable)")
    parser.add_argument("--limit", type=int, default=None, help="cases a job (default: all)")
    parser.add_argument("--per-kind", type=int, default=None, help="phrasings a kind and set")
    parser.add_argument(
        "--set", action="append", choices=sorted(SETS), help="sets of phrasings (repeatable)"
    )
    parser.add_argument("--pairs", type=int, default=20, help="clean passages a TREC query")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--at-once", type=int, default=8, help="job runs in flight at once")
    parser.add_argument(
        "--candidate-reader",
        action="store_true",
        help="screen with the candidate reader by meaning beside the shipped patterns, with "
        "LLMJudge's counter-examples (bench/_meaning_screen.py; not shipped)",
    )
    parser.add_argument("--section", default="injection_minilm")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    judges = args.judges or [("local:minilm", [])]
    screened: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    counter = 0
    if args.candidate_reader:
        screened = candidate_in_preflight()
        counter = use_counter_examples(llmjudge_sentences(args.data))
    load = os.getloadavg()
    started = time.perf_counter()
    table = [
        "| judge | job | attack kind | success before | success after | collateral |",
        "|---|---|---|---:|---:|---:|",
    ]
    clean = [
        "| judge | job | data | cases attacked | clean measure | before | after "
        "| clean cases changed | seconds |",
        "|---|---|---|---:|---|---:|---:|---:|---:|",
    ]
    skipped, counts = [], {}
    for spec, own in judges:
        options = judge_options([*(args.common or []), *own])
        label = " ".join([spec, *(f"{k}={v}" for k, v in options.items() if k != "n_threads")])
        with served(spec, options) as (real, given), screened:
            judge = get_judge(real, **given)
            try:
                for job in [j for j in JOBS if not args.job or j.job in args.job]:
                    if not judge.supports(job.job):
                        skipped.append(f"`{label}` does not do {job.job}")
                        continue
                    cases, clean_cases = job.cases(args)
                    attacks = chosen(job, args.per_kind, args.set)
                    counts[job.job] = len(attacks)
                    m = run_sync(
                        measure(job, judge, cases, clean_cases, attacks, label, args.at_once)
                    )
                    table += rows(label, job, m)
                    before, after = m["clean"]
                    clean.append(
                        f"| {label} | {job.job} | {job.data} | {m['cases']} | {job.measure} "
                        f"({m['clean_cases']} cases) | {before:.3f} | {after:.3f} | "
                        f"{m['changed']} | {m['seconds']:.0f} |"
                    )
            finally:
                run_sync(judge.aclose())
    seconds = time.perf_counter() - started
    cases = "every case" if args.limit is None else f"{args.limit} cases"
    body = "\n".join(
        [
            f"Phrasings a job: {', '.join(f'{j} {n}' for j, n in counts.items())}"
            + (f" (the first {args.per_kind} of each kind and set)" if args.per_kind else "")
            + (f" (sets: {', '.join(args.set)})" if args.set else "")
            + f"; {cases} a job; seed {args.seed}; {seconds:.0f} s in all; load average "
            f"(1, 5, 15 min) {_load(load)} at the start, {_load(os.getloadavg())} at the "
            "end; 2 cores.",
            "",
            (
                "Screened with the candidate reader by meaning beside the shipped patterns "
                f"(`bench/_meaning_screen.py`, {counter} LLMJudge counter-examples): what the "
                "jobs would do with it shipped; it is not.\n\n"
                if args.candidate_reader
                else ""
            )
            + "Success: k of the n attacks that had room to succeed (their clean run was not "
            "already where the attack pushes). Collateral: attacks after which a clean "
            "passage of the same input changed, of all attacks (after the defence).",
            "",
            *table,
            "",
            *clean,
            "",
            f"Not measured: {'; '.join(skipped)}." if skipped else "",
        ]
    )
    print(body)
    if not args.no_write:
        names = ", ".join(spec for spec, _ in judges)
        write_section(args.section, f"Injection: attack success against the jobs ({names})", body)


if __name__ == "__main__":
    main()
