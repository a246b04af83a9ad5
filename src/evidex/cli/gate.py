"""``evidex eval compare`` and ``evidex gate``: a run against a baseline run, and release gates.

Thin layers over :mod:`evidex.evaluate.compare` and :mod:`evidex.evaluate.gate`. ``evidex gate``
exits with 1 when a metric is under its floor or significantly below its baseline
(:class:`~evidex.evaluate.gate.GatesFailed`, a run-time error: the configuration was fine), 2
on a bad configuration and 0 when every gate passes.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evidex.cli._app import app
from evidex.cli._options import output_option, unset_option
from evidex.cli._tables import print_table
from evidex.errors import ConfigError
from evidex.evaluate.compare import compare_reports, comparison_json, comparison_markdown
from evidex.evaluate.gate import GateRun, GatesFailed, load_gates, run_gates
from evidex.evaluate.plots import fmt_value
from evidex.evaluate.run import read_report

__all__ = ["compare_command", "gate_command"]

_FORMATS = ("markdown", "json")


@app.command("eval compare")
def compare_command(
    baseline: Annotated[
        Path,
        typer.Argument(
            metavar="BASELINE",
            show_default=False,
            help="The baseline run: a report.json written by evidex eval, or its folder.",
        ),
    ],
    report: Annotated[
        Path,
        typer.Argument(
            metavar="REPORT",
            show_default=False,
            help="The run to compare with it, of the same job on the same golden set.",
        ),
    ],
    output: Annotated[
        Path | None, output_option("Write the comparison to FILE instead of stdout.")
    ] = None,
    fmt: Annotated[
        str | None,
        unset_option(
            "--format",
            metavar="FORMAT",
            help="markdown or json. Default: json when --output ends in .json, else markdown.",
        ),
    ] = None,
    samples: Annotated[
        int,
        typer.Option("--samples", min=100, metavar="N", help="Bootstrap resamples of the items."),
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", metavar="S", help="Seed of the bootstrap.")] = 0,
    show: Annotated[
        int,
        typer.Option(
            "--show",
            min=0,
            metavar="N",
            help="Changed items listed in the Markdown (the JSON lists every one).",
        ),
    ] = 50,
) -> None:
    """Compare an evaluation run with a baseline run, item by item: each metric side by side,
    the difference with a paired bootstrap interval over the items both reports hold (the
    job's unit of evaluation: a query–passage pair, a query, an input, an answer or a
    question), and every item whose judgment changed, with both judgments and reasons."""
    chosen = fmt or ("json" if output is not None and output.suffix == ".json" else "markdown")
    if chosen not in _FORMATS:
        raise ConfigError(f"--format is markdown or json, got {chosen!r}")
    comparison = compare_reports(
        read_report(baseline), read_report(report), samples=samples, seed=seed
    )
    comparison["baseline"]["report"] = str(baseline)
    comparison["report"]["report"] = str(report)
    if chosen == "json":
        text = comparison_json(comparison)
    else:
        text = comparison_markdown(comparison, limit=show)
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
    console = Console(stderr=True)
    print_table(console, _metrics_table(comparison))
    changed = comparison["items"]
    console.print(
        Text(
            f"{changed['changed']} of {changed['compared']} {comparison['unit']}s changed "
            f"judgment; wrote {output}"
        )
    )


def _metrics_table(comparison: dict[str, Any]) -> Table:
    level = f"{comparison['bootstrap']['level']:.0%}"
    table = Table(title=f"{comparison['job']}: report against baseline", title_justify="left")
    table.add_column("measure", overflow="fold")
    for name in ("baseline", "report", "change", f"{level} interval"):
        table.add_column(name, no_wrap=True)
    table.add_column("verdict")
    for row in comparison["metrics"]:
        table.add_row(
            row["measure"],
            fmt_value(row["baseline"]),
            fmt_value(row["report"]),
            _signed(row["difference"]),
            _interval(row["low"], row["high"]),
            Text(row["verdict"], style=_STYLES.get(row["verdict"], "")),
        )
    return table


_STYLES = {"worse": "bold red", "better": "green"}


def _signed(value: float) -> str:
    return "undefined" if math.isnan(value) else f"{value:+.3f}"


def _interval(low: float, high: float) -> str:
    return "undefined" if math.isnan(low) or math.isnan(high) else f"{low:+.3f} to {high:+.3f}"


@app.command("gate")
def gate_command(
    config: Annotated[
        Path, typer.Option("--config", "-c", metavar="FILE", help="Gates file (TOML).")
    ] = Path("gates.toml"),
    baseline: Annotated[
        Path | None,
        unset_option(
            "--baseline",
            metavar="REPORT",
            help="A baseline run's report.json (or its folder): every gate of its job also "
            "fails when a gated metric falls significantly below it (the 95% paired bootstrap "
            "interval of the difference lies wholly below -tolerance).",
        ),
    ] = None,
    tolerance: Annotated[
        float | None,
        unset_option(
            "--tolerance",
            metavar="T",
            min=0.0,
            help="How far a metric may fall against its baseline before a significant fall "
            "fails the gate (default: each gate's tolerance, else 0).",
        ),
    ] = None,
) -> None:
    """Check evaluation metrics against their floors, and against a baseline run; exit 1 when
    any is missed."""
    outcome = run_gates(load_gates(config), baseline=baseline, tolerance=tolerance)
    table = Table(title=f"release gates ({config})", title_justify="left")
    for name in ("gate", "metric", "value", "floor", "result"):
        table.add_column(name)
    for r in outcome.floors:
        table.add_row(r.gate, r.metric, fmt_value(r.value), f"{r.floor:g}", _result(r.passed))
    console = Console()
    print_table(console, table)
    if outcome.baselines:
        print_table(console, _baseline_table(outcome))
    if outcome.passed:
        return
    problems = []
    missed = [r for r in outcome.floors if not r.passed]
    if missed:
        problems.append(f"{len(missed)} of {len(outcome.floors)} gate metric(s) under their floor")
    problems += [f"significant regression: {r.message()}" for r in outcome.baselines if r.regressed]
    raise GatesFailed("; ".join(problems))


def _baseline_table(outcome: GateRun) -> Table:
    first = outcome.baselines[0]
    table = Table(
        title=f"against the baseline (paired bootstrap over {first.unit}s)", title_justify="left"
    )
    table.add_column("gate")
    table.add_column("metric", overflow="fold")
    for name in ("baseline", "value", "change", "95% interval", "result"):
        table.add_column(name, no_wrap=True)
    for r in outcome.baselines:
        table.add_row(
            r.gate,
            r.metric,
            fmt_value(r.baseline_value),
            fmt_value(r.value),
            _signed(r.difference),
            _interval(r.low, r.high),
            _result(not r.regressed),
        )
    return table


def _result(passed: bool) -> Text:
    return Text("pass", style="green") if passed else Text("FAIL", style="bold red")
