"""Start-up: what one ``evidex`` call in a shell pipeline, and ``import evidex``, cost.

    python bench/startup.py [--runs 15] [--top 8] [--no-write]

Each command runs ``--runs`` times in a fresh interpreter, interleaved (one of each in turn, so
that the machine's load falls on all of them alike); the figures are medians, beside the
interpreter alone (``python -c pass``) measured in the same rounds. The targets: ``import
evidex``, ``evidex --version`` and ``evidex --help`` at most 0.3 s each. Then ``python -X
importtime`` says where the time goes: for ``import evidex`` and ``evidex --help``, the
imports with the largest cumulative time (median over the runs; a module's time includes the
modules it imports). Figures go to docs/benchmarks.md, section ``startup``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section

BIN = Path(sys.executable).parent
COMMANDS = {
    "python -c pass (the interpreter alone)": [sys.executable, "-c", "pass"],
    "python -c 'import evidex'": [sys.executable, "-c", "import evidex"],
    "evidex --version": [str(BIN / "evidex"), "--version"],
    "evidex --help": [str(BIN / "evidex"), "--help"],
    "python -c 'import evidex; evidex.tier'": [sys.executable, "-c", "import evidex; evidex.tier"],
}
TARGET_S = 0.3
IMPORTTIME = {
    "import evidex": "import evidex",
    "evidex --help": "from evidex.cli import main; main(['--help'])",
}
"""What ``python -X importtime`` traces, by the name its table is shown under."""


def import_times(code: str) -> dict[str, int]:
    """Cumulative microseconds per module imported by ``python -X importtime -c code``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    times: dict[str, int] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, module = line.split("|")
        times[module.strip()] = int(cumulative)
    return times


def top_imports(runs: list[dict[str, int]], top: int) -> list[str]:
    """Markdown rows of the ``top`` imports by median cumulative time over ``runs``."""
    modules = {m for run in runs for m in run}
    medians = {m: statistics.median(run.get(m, 0) for run in runs) for m in modules}
    ranked = sorted(medians.items(), key=lambda kv: -kv[1])[:top]
    return [f"| `{module}` | {micro / 1000:.1f} ms |" for module, micro in ranked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--top", type=int, default=8, help="imports listed per -X importtime")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    traced: dict[str, list[dict[str, int]]] = {name: [] for name in IMPORTTIME}
    load = os.getloadavg()[0]
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ)
            times[name].append(time.perf_counter() - started)
        for name, code in IMPORTTIME.items():
            traced[name].append(import_times(code))
    after = os.getloadavg()[0]
    base = statistics.median(times["python -c pass (the interpreter alone)"])
    lines = [
        f"Medians of {args.runs} runs each, interleaved; 1-min load average {load:.1f} at start, "
        f"{after:.1f} at the end; {os.cpu_count()} cores.",
        "",
        "| command | median | over the interpreter alone | target |",
        "|---|---|---|---|",
    ]
    for name, measured in times.items():
        median = statistics.median(measured)
        target = ""
        if name in ("python -c 'import evidex'", "evidex --version", "evidex --help"):
            target = f"≤ {TARGET_S} s: {'met' if median <= TARGET_S else 'not met'}"
        lines.append(f"| `{name}` | {median:.3f} s | {median / base:.1f}× | {target} |")
    for name, runs in traced.items():
        lines += [
            "",
            f"`python -X importtime` of `{name}`: the {args.top} imports with the largest "
            f"cumulative time (median of {args.runs} runs; each includes what it imports, so "
            "the rows overlap).",
            "",
            "| module | cumulative |",
            "|---|---:|",
            *top_imports(runs, args.top),
        ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("startup", "Start-up of a CLI call and of import evidex", text)


if __name__ == "__main__":
    main()
