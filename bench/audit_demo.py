"""Time of the demo's steps, the audit of its six claims above all, with the demo's own judges.

    python bench/audit_demo.py [--no-write]

Runs :func:`evidex.cli.demo.run_demo` as ``evidex demo`` does (local:minilm reranks and tiers,
local:qwen audits and classifies in the mode their jobs register; in-memory store) and reports
each step's seconds, the audit's decision, source and judge calls, and each claim's grade beside
the author's. The load average before and after is printed with them: on a shared machine it
decides the figures more than anything else. Figures go to docs/benchmarks.md, section
``audit_demo``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section
from evidex.cli.demo import run_demo
from evidex.jobs import judge_defaults


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-write", action="store_true", help="print, do not touch the docs")
    args = parser.parse_args(argv)
    before = os.getloadavg()[0]
    run = run_demo(store="sqlite://")
    after = os.getloadavg()[0]
    lines = [
        f"Judges {run.judges}; local:qwen options for audit "
        f"{judge_defaults('audit', 'local:qwen')} and classify "
        f"{judge_defaults('classify', 'local:qwen')} (the jobs' registered defaults), "
        f"EVIDEX_QWEN_THREADS={os.environ.get('EVIDEX_QWEN_THREADS', '(unset: every core)')}; "
        f"{os.cpu_count()} cores; 1-min load average before / after: {before:.1f} / {after:.1f}.",
        "",
        "| step | judge | seconds |",
        "|---|---|---:|",
        *(f"| {t.step} | {t.judge_id or '-'} | {t.seconds:.1f} |" for t in run.timings),
    ]
    if run.audit is not None:
        audit = run.audit
        lines += [
            "",
            f"Audit: decision **{audit.decision.decision.upper()}** (the author expects "
            f"{run.example.answer.expected_decision.upper()}), source {audit.source}, "
            f"{audit.judge_calls} judge call(s).",
            "",
            "| claim | author | audit |",
            "|---|---|---|",
            *(
                f"| {c.claim[:60]} | {c.expected}{' (contradicted)' * c.expected_contradicted} "
                f"| {c.judged}{' (contradicted)' * bool(c.contradicted)} |"
                for c in run.claim_checks()
            ),
        ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section("audit_demo", "The demo's steps with the embedded judges", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
