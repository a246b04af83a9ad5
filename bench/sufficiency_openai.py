"""The sufficiency job through the ``openai:`` judge, over the scripted loopback server.

    python bench/sufficiency_openai.py [--queries 50] [--latency-ms 50] [--no-write]

The server (``bench/_loopback_judge.py``, its own process on loopback) answers each
sufficiency request with a valid reply, or, for a question ending in ``[invalid N]``, with N
invalid replies first (not JSON, then a quote that is not verbatim, then a confidence above 1).
Four runs of ``--queries`` questions (three passages each, cache off, an in-memory store):
every reply valid; one invalid reply per question (the re-ask with the errors fixes it); two
(the re-ask, then the last attempt at temperature 0 fixes it); three (every attempt invalid:
the explicit fallback, insufficient at confidence 0, decided ``escalate`` with a review item).
The counts come from the audit log of each run (the requests the judge answered, the re-asks,
the temperature-0 attempts, the fallbacks) and are checked against what the script implies and
against the server's own count; a mismatch exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import evidex
from evidex import HarnessSettings, Passage, open_store
from evidex.jobs.sufficiency import asufficiency_many
from evidex.judges import get_judge

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section
from api_path import LoopbackJudgeServer

SCENARIOS = (
    ("every reply valid", 0),
    ("one invalid reply, then valid", 1),
    ("two invalid replies, then valid", 2),
    ("every reply invalid", 3),
)


def questions(count: int, invalid: int) -> list[dict[str, Any]]:
    """``count`` questions with three passages each; ``invalid`` scripts the server."""
    items = []
    for i in range(count):
        tail = f" [invalid {invalid}]" if invalid else ""
        passages = [
            Passage(passage_id=f"q{i}-p{j}", text=f"Record {i}.{j} states fact {i * 3 + j}.")
            for j in range(3)
        ]
        items.append(
            {"id": f"q{i}", "query": f"What does record {i} state?{tail}", "passages": passages}
        )
    return items


async def run(server: LoopbackJudgeServer, count: int, invalid: int) -> dict[str, Any]:
    judge = get_judge("openai:bench-model", base_url=server.base_url)
    store = open_store("sqlite://")
    server.reset()
    try:
        results = await asufficiency_many(
            questions(count, invalid),
            judge=judge,
            store=store,
            settings=HarnessSettings(use_cache=False, max_concurrency=8),
        )
    finally:
        aclose = getattr(judge, "aclose", None)
        if aclose is not None:
            await aclose()
    rows = store.audit_rows(job="sufficiency", step="sufficiency")
    answered = [r for r in rows if r["status"] in ("ok", "invalid")]
    counts = {
        "requests": len(answered),
        "invalid": sum(r["status"] == "invalid" for r in answered),
        "reasks": sum(r["attempt"] > 1 and r["temperature"] != 0 for r in answered),
        "temperature_zero": sum(r["temperature"] == 0 for r in answered),
        "fallbacks": sum(r.source == "fallback" for r in results),
        "decisions": dict(Counter(r.decision.decision for r in results)),
        "reviews": sum(len(r.review_item_ids) for r in results),
        "fallback_answered": sum(
            r.source == "fallback" and r.decision.decision == "answer" for r in results
        ),
        "server": server.stats(),
    }
    store.close()
    return counts


def expected(count: int, invalid: int) -> dict[str, int]:
    """What the script implies: attempts are the first, the re-ask, the temperature-0 one."""
    attempts = min(invalid + 1, 3)
    return {
        "requests": count * attempts,
        "invalid": count * min(invalid, 3),
        "reasks": count * (attempts >= 2),
        "temperature_zero": count * (attempts == 3),
        "fallbacks": count * (invalid >= 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)

    server = LoopbackJudgeServer(args.latency_ms)
    measured = []
    try:
        for name, invalid in SCENARIOS:
            counts = asyncio.run(run(server, args.queries, invalid))
            measured.append((name, invalid, counts))
    finally:
        server.stop()

    lines = [
        f"{args.queries} questions per run, three passages each, `openai:bench-model` over the "
        f"loopback server ({args.latency_ms:g} ms latency), cache off; evidex "
        f"{evidex.__version__}. Counts from each run's audit log.",
        "",
        "| replies | judge requests | invalid | re-asks | temperature-0 retries | fallbacks "
        "| decisions | review items |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    problems = []
    for name, invalid, counts in measured:
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(counts["decisions"].items()))
        lines.append(
            f"| {name} | {counts['requests']} | {counts['invalid']} | {counts['reasks']} | "
            f"{counts['temperature_zero']} | {counts['fallbacks']} | {decisions} | "
            f"{counts['reviews']} |"
        )
        for key, value in expected(args.queries, invalid).items():
            if counts[key] != value:
                problems.append(f"{name}: {key} {counts[key]}, expected {value}")
        if counts["server"]["requests"] != counts["requests"]:
            problems.append(f"{name}: the server answered {counts['server']['requests']}")
        if counts["server"]["temperature_zero"] != counts["temperature_zero"]:
            problems.append(f"{name}: the server saw {counts['server']['temperature_zero']} at 0")
        if counts["fallback_answered"]:
            problems.append(f"{name}: {counts['fallback_answered']} fallback(s) decided answer")
        if invalid >= 3 and counts["decisions"] != {"escalate": args.queries}:
            problems.append(f"{name}: fallbacks must all escalate, got {counts['decisions']}")
    lines += [
        "",
        "Every fallback is explicit (`source: fallback`, insufficient at confidence 0) and is "
        "decided `escalate`, never `answer`, with a review item; a valid reply (confidence "
        "0.9) is decided `answer` or `abstain` by the default policy. The counts match what "
        "the script implies and the server's own count"
        + (": yes." if not problems else f": NO ({'; '.join(problems)})."),
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("sufficiency_openai", "Sufficiency through the openai: judge", body)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
