"""Start-up: what one ``evidex`` call in a shell pipeline, and ``import evidex``, cost.

    python bench/startup.py [--runs 15] [--no-write]

Each command runs ``--runs`` times in a fresh interpreter, interleaved (one of each in turn, so
that the machine's load falls on all of them alike); the figures are medians, beside the
interpreter alone (``python -c pass``) measured in the same rounds. The targets: ``import
evidex``, ``evidex --version`` and ``evidex --help`` at most 0.3 s each. Figures go to
docs/benchmarks.md, section ``startup``.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    load = os.getloadavg()[0]
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ)
            times[name].append(time.perf_counter() - started)
    base = statistics.median(times["python -c pass (the interpreter alone)"])
    lines = [
        f"Medians of {args.runs} runs each, interleaved; load average {load:.1f} at start.",
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
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_section("startup", "Start-up of a CLI call and of import evidex", text)


if __name__ == "__main__":
    main()
