"""``evidex demo``: the tier job and context selection on a bundled example, as readable tables.

The example (``evidex/data/examples/tier_demo.json``) is one query with twelve passages: some
answer it, some give background, some only share its words, some are off-topic; its author's
labels are shown next to the judge's, so the demo also shows where the judge disagrees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evidex.cli._app import app, write_json
from evidex.cli._io import (
    BaseUrlOpt,
    DbOpt,
    JudgeOpt,
    VerboseOpt,
    open_db,
    verbose_logging,
)
from evidex.cli.tier import report_fallbacks, run_tier
from evidex.jobs.select import SelectedContext, select_context
from evidex.jobs.tier import TierResult
from evidex.types import Passage

__all__ = ["DemoExample", "demo_command", "load_demo"]

DEMO_POLICY = "standard"
DEMO_BUDGET = 200
WIDE = 110
_TIER_STYLE = ["bold green", "cyan", "yellow", "dim"]


@dataclass(frozen=True)
class DemoExample:
    query: str
    passages: list[Passage]
    expected_tiers: dict[str, str]


def load_demo() -> DemoExample:
    """The bundled example, read from package data."""
    raw = resources.files("evidex").joinpath("data/examples/tier_demo.json").read_text("utf-8")
    data = json.loads(raw)
    return DemoExample(
        query=data["query"],
        passages=[Passage.model_validate(p) for p in data["passages"]],
        expected_tiers=dict(data["expected_tiers"]),
    )


@app.command("demo")
def demo_command(
    judge: JudgeOpt = None,
    base_url: BaseUrlOpt = None,
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            metavar="TOKENS",
            help=f"Token budget of the {DEMO_POLICY} context selection shown at the end.",
        ),
    ] = DEMO_BUDGET,
    json_file: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="FILE",
            dir_okay=False,
            show_default=False,
            help="Also write the full result (as `evidex tier` prints it) to FILE.",
        ),
    ] = None,
    db: DbOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Run the tier job and context selection on a bundled example.

    The example is a Kubernetes question with twelve retrieved passages. The passages are
    graded into relevance tiers, shown next to the example's hand labels, and the generator's
    context is picked under a small token budget. Runs offline with the embedded local:minilm
    judge unless --judge names another.
    """
    with verbose_logging(verbose):
        demo = load_demo()
        with open_db(db) as store:
            result = run_tier(
                demo.query, demo.passages, store=store, judge_spec=judge, base_url=base_url
            )
        context = select_context(result, DEMO_POLICY, budget)
        console = Console()
        _show_tiers(console, demo, result)
        _show_context(console, context)
        console.print(
            Text(
                f"Run {result.run_id}: {result.judge_calls} judge call(s). Audit log: "
                f"evidex log --run {result.run_id}. Review queue: evidex review list.",
                style="dim",
            )
        )
        if json_file is not None:
            report: dict[str, Any] = result.report()
            report["context"] = context.model_dump(mode="json")
            write_json(report, json_file)
        report_fallbacks(result)


def _show_tiers(console: Console, demo: DemoExample, result: TierResult) -> None:
    console.print(Text.assemble(("Query: ", "bold"), demo.query))
    console.print(Text.assemble(("Judge: ", "bold"), result.judge_id))
    names = result.scheme.names
    style = {name: _TIER_STYLE[min(i, len(_TIER_STYLE) - 1)] for i, name in enumerate(names)}
    # Below WIDE columns, id, tier and source share one cell so the texts keep their room.
    wide = console.width >= WIDE
    table = Table(show_lines=True, box=box.SIMPLE_HEAD)
    if wide:
        table.add_column("id", no_wrap=True)
        table.add_column("tier", min_width=max(map(len, names)))
    else:
        table.add_column("passage · tier · source", min_width=max(map(len, names)))
    table.add_column("snippet", overflow="fold", ratio=1)
    table.add_column("justification", overflow="fold", ratio=2)
    if wide:
        table.add_column("source", no_wrap=True, min_width=len("fallback"))
    agree = 0
    for a in result.classifications:
        expected = demo.expected_tiers.get(a.passage_id, "")
        agree += expected == a.tier
        tier_cell = Text(a.tier, style=style.get(a.tier, ""))
        if expected and expected != a.tier:
            tier_cell.append(f"\n(hand: {expected})", style="red")
        source = Text(a.source, style="bold red" if a.source == "fallback" else "")
        texts = [Text(a.key_evidence_snippet or "—"), Text(a.justification)]
        if wide:
            table.add_row(Text(a.passage_id), tier_cell, *texts, source)
        else:
            passage = Text(a.passage_id, style="bold", overflow="fold")
            table.add_row(Text("\n").join([passage, tier_cell, source]), *texts)
    console.print(table)
    summary = " · ".join(f"{n} {result.tier_summary[result.scheme.count_key(n)]}" for n in names)
    console.print(Text.assemble(("Tier summary: ", "bold"), summary))
    console.print(
        f"The judge agrees with the hand labels on {agree} of {len(result.classifications)} "
        "passages (where they differ, the hand label is under the tier).",
        highlight=False,
    )


def _show_context(console: Console, context: SelectedContext) -> None:
    console.print()
    console.print(
        Text.assemble(
            ("Context for generation: ", "bold"),
            f"policy {context.policy}, {context.tokens_used} of {context.token_budget} tokens used",
        )
    )
    table = Table()
    for column in ("id", "tier", "tokens", "role"):
        table.add_column(column)
    for item in context.items:
        role = "supplementary" if item.supplementary else "evidence"
        table.add_row(Text(item.passage_id), Text(item.tier), str(item.tokens), role)
    console.print(table)
    if context.left_out:
        console.print(Text("Left out:", style="bold"))
        for gone in context.left_out:
            why = (
                f"over the budget ({gone.tokens} tokens)"
                if gone.reason == "budget"
                else f"the {context.policy} policy excludes {gone.tier}"
            )
            console.print(Text(f"  {gone.passage_id}: {why}"))
