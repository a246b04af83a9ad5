"""Seconds of one 10-passage sufficiency check by ``local:qwen mode=score``, offline.

    nice python bench/sufficiency_speed.py [DATA_PATH] [--runs 5] [--option n_threads=1]

Each check is the whole job call (``evidex.jobs.sufficiency.sufficiency``: preflight, the
sentence picking by MiniLM, the Yes/No questions, validation and the policy) on a question of
CLAPnq dev with its own passage and the passages of nine other questions, with a fresh
in-memory store so nothing is served from the result cache. One warm-up check loads the models;
then ``--runs`` checks of different questions are timed, each in two states of the model's KV
cache: ``cold`` (dropped before the call, so the instructions are evaluated too) and ``warm``
(the previous check's prompt kept, as in a running service: the shared instructions are reused,
everything of the new question is evaluated). The median is reported against the target.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _options import add_option_flag, judge_options
from _report import write_section
from evidex.evaluate.golden import SufficiencyGolden, load_golden
from evidex.jobs.sufficiency import sufficiency
from evidex.store import open_store

TARGET_S = 10.0
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/clapnq/sufficiency_dev.jsonl"


def checks(records: Sequence[SufficiencyGolden], count: int) -> list[SufficiencyGolden]:
    """``count`` questions (answerable, in sha256-of-id order), each with its passage first and
    then the passages of the next nine questions, ids kept."""
    ordered = sorted(
        (r for r in records if r.sufficient), key=lambda r: hashlib.sha256(r.id.encode()).digest()
    )
    out = []
    for i in range(count):
        group = [ordered[(i + j) % len(ordered)] for j in range(10)]
        passages = [p for r in group for p in r.passages[:1]]
        out.append(group[0].model_copy(update={"passages": passages}))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    add_option_flag(parser)
    args = parser.parse_args(argv)
    from evidex.judges._qwen import QwenJudge, QwenOptions

    options = judge_options(args.option)
    judge = QwenJudge(options=QwenOptions(mode="score", **options))
    records = checks(load_golden(args.data, "sufficiency"), 1 + 2 * args.runs)
    timings: dict[str, list[float]] = {"cold": [], "warm": []}
    model_s: dict[str, list[float]] = {"cold": [], "warm": []}
    tokens: list[int] = []
    load = os.getloadavg()[0]
    for i, record in enumerate(records):
        state = "warm-up" if i == 0 else ("cold" if i % 2 else "warm")
        if state == "cold":
            judge.reset_cache()
        busy = judge.busy_s
        started = time.perf_counter()
        result = sufficiency(
            record.question, record.passages, judge=judge, store=open_store("sqlite://")
        )
        seconds = time.perf_counter() - started
        if result.source != "judge" or result.judge_calls != 1:
            raise SystemExit(f"check {i} was not one valid call: {result.source}")
        print(
            f"{state}: {seconds:.1f} s ({judge.busy_s - busy:.1f} s in the model, "
            f"{result.usage.prompt_tokens} prompt tokens read) sufficient={result.sufficient}",
            file=sys.stderr,
            flush=True,
        )
        if state != "warm-up":
            timings[state].append(seconds)
            model_s[state].append(judge.busy_s - busy)
            tokens.append(result.usage.prompt_tokens)
    load = max(load, os.getloadavg()[0])
    rows = [
        f"| {state} | {len(ts)} | {statistics.median(ts):.1f} | {min(ts):.1f} | {max(ts):.1f} | "
        f"{statistics.median(model_s[state]):.1f} |"
        for state, ts in timings.items()
    ]
    warm = statistics.median(timings["warm"])
    met = "met" if warm <= TARGET_S else "not met"
    body = (
        "One 10-passage sufficiency check (the job call, `local:qwen` `mode=score`, options "
        f"{options or 'default'}) on CLAPnq dev questions, each with its passage and nine "
        f"others; one warm-up, then {args.runs} checks of different questions in each KV-cache "
        f"state (see the script's docstring). Load average up to {load:.1f} on "
        f"{os.cpu_count()} cores while measuring (other work shared the machine).\n\n"
        "| KV cache | checks | median s | min s | max s | median s in the model |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"Prompt tokens read per check (every Yes/No question counted whole, the shared part "
        f"included): median {statistics.median(tokens):.0f}. Target <= {TARGET_S:g} s "
        f"(warm, the service's steady state): {met}."
    )
    print(body)
    if not args.no_write:
        write_section("sufficiency_speed", "Sufficiency: speed of a 10-passage check", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
