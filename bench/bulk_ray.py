"""``evidex bulk tier`` with ``--engine ray`` (2 local actors) against the local engine.

    python bench/bulk_ray.py [--data ../shared/data] [--n 600] [--workers 2] [--concurrency 4]

The same ``--n`` generated TREC DL 2019 tasks (one query, one or two of its BM25 passages;
bench/bulk.py's generator) are graded by ``local:minilm`` twice, each run a child process with
its own store: the local engine (one process, ``--concurrency`` tasks in flight) and the Ray
engine on this machine (``--ray-workers`` actors, each with its own judge and store connection,
``--concurrency`` tasks in flight each; Ray started by the run, no dashboard). Tasks/s = tasks /
wall time of the child, start-up included (Ray's start, the actors' model loads). The two
outputs are compared by id on the fields that do not vary from run to run (tiers, snippets,
sources, justifications). Writes the ``bulk_ray`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section
from bulk import EVIDEX, child, write_tasks

ROOT = Path(__file__).resolve().parent.parent
STABLE = ("judge_id", "prompt_version", "query", "classifications", "tier_summary")


def stable(out: Path) -> dict[str, dict[str, Any]]:
    rows = (json.loads(line) for line in out.read_text(encoding="utf-8").splitlines())
    return {r["id"]: {f: r[f] for f in STABLE} for r in rows}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--n", type=int, default=600, help="tasks")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    load_before = os.getloadavg()[0]

    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-bulk-ray-") as tmp:
        work = Path(tmp)
        tasks = work / "tasks.jsonl"
        pairs = write_tasks(tasks, args.n, args.data)
        on_ray = ["--engine", "ray", "--ray-workers", str(args.workers)]
        engines = {
            "local": [],
            "ray": on_ray,
            "ray_1t": [*on_ray, "--judge-option", "threads=1"],
        }
        for name, extra in engines.items():
            out = work / f"{name}.jsonl"
            cmd = [EVIDEX, "bulk", "tier", "-i", str(tasks), "-o", str(out), "-j", "local:minilm"]
            cmd += ["--db", f"sqlite:///{work / f'{name}.db'}"]
            cmd += ["--concurrency", str(args.concurrency), *extra]
            run = child(cmd, out)
            if run["code"] != 0:
                print(run["stderr"][-3000:])
                return 1
            run["rows"] = stable(out)
            runs[name] = run
            print(f"{name}: {args.n} tasks in {run['wall_s']:.1f} s")
    local, ray, ray_1t = runs["local"], runs["ray"], runs["ray_1t"]
    same = local["rows"] == ray["rows"] == ray_1t["rows"]
    load_after = os.getloadavg()[0]

    def rate(run: dict[str, Any]) -> str:
        return f"{args.n / run['wall_s']:.1f} tasks/s ({pairs / run['wall_s']:.1f} pairs/s)"

    NOTE = (
        "`local:minilm` already runs one encoder thread per core in one process (its `threads`\n"
        "option, default the CPU count), so on one 2-core machine the local engine uses both\n"
        "cores and the Ray engine adds its start-up and a second copy of the model; each actor's\n"
        "judge starts as many threads as the machine has cores unless `threads=1` is given.\n"
        "The Ray engine is for what one machine cannot serve: actors on several machines, each\n"
        "an `openai:` judge pool over its own model servers, with a shared PostgreSQL store\n"
        "(`--ray-address`, `--db postgresql://...`)."
    )
    body = f"""
{args.n} tasks ({pairs} query-passage pairs) from TREC DL 2019, graded by `local:minilm`
(`evidex bulk tier`, `--concurrency {args.concurrency}`), each engine a child process with its
own SQLite store; wall time includes start-up (for Ray: starting Ray, {args.workers} actors
each loading the model).

| engine | wall | rate | peak RSS of the CLI process |
|---|---|---|---|
| local (one process) | {local["wall_s"]:.1f} s | {rate(local)} | {local["rss_mib"]:.0f} MiB |
| ray, {args.workers} local actors | {ray["wall_s"]:.1f} s | {rate(ray)} | \
{ray["rss_mib"]:.0f} MiB (the driver; the actors are Ray's worker processes) |
| ray, {args.workers} local actors, `--judge-option threads=1` | {ray_1t["wall_s"]:.1f} s | \
{rate(ray_1t)} | {ray_1t["rss_mib"]:.0f} MiB |

Outputs equal by id on tiers, snippets, justifications, sources and summaries: **{same}**.
Load average (1 min) {load_before:.2f} before, {load_after:.2f} after, on
{os.cpu_count()} cores shared with other work.

{NOTE}
"""
    write_section("bulk_ray", "evidex bulk: the Ray engine against the local engine", body)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
