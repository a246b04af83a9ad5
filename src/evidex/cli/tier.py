"""``evidex tier``: grade passages into relevance tiers and print the result as JSON."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from evidex.cli._app import app, err_console, write_json
from evidex.cli._io import RunFlags, echo_hooks, open_db, progress, read_passages, run_flags
from evidex.cli._judge import BaseUrls, job_judge
from evidex.cli._options import (
    PromptOpt,
    RiskOpt,
    examples_option,
    passages_option,
    query_option,
    tiers_option,
    unset_option,
)
from evidex.cli._spend import report_spend
from evidex.errors import ConfigError, InputError
from evidex.jobs.select import select_context
from evidex.jobs.tier import DEFAULT_BATCH, TierResult, tier
from evidex.loaders import load_examples
from evidex.store import SqlStore
from evidex.tasks.tier import TierExample
from evidex.types import Passage, RiskLevel, TierScheme

__all__ = ["Policy", "run_tier", "tier_command"]

DEFAULT_BUDGET = 4000


class Policy(str, Enum):
    """Context selection policies (see :mod:`evidex.jobs.select`)."""

    STRICT = "strict"
    STANDARD = "standard"
    BROAD = "broad"


def run_tier(
    query: str,
    passages: Sequence[Passage],
    *,
    store: SqlStore,
    judge_spec: str | None = None,
    base_url: BaseUrls = None,
    judge_option: Sequence[str] | None = None,
    tiers: TierScheme | None = None,
    examples: Sequence[TierExample] | None = None,
    risk: RiskLevel = RiskLevel.LOW,
    batch_size: int = DEFAULT_BATCH,
    prompt: Path | None = None,
) -> TierResult:
    """Run the tier job for a command: build the judge, show progress, close the judge after.

    Shared by ``evidex tier`` and ``evidex demo`` so both behave the same way.
    """
    batches = math.ceil(len(passages) / batch_size) if batch_size > 0 else 0
    with (
        job_judge(judge_spec, "tier", base_url, judge_option) as judge,
        progress(batches, "tier batches") as on_progress,
    ):
        return tier(
            query,
            passages,
            judge=judge,
            store=store,
            hooks=echo_hooks(),
            tiers=tiers,
            examples=examples,
            risk=risk,
            batch_size=batch_size,
            on_progress=on_progress,
            prompt=prompt,
        )


def report_fallbacks(result: TierResult) -> None:
    """Say on stderr when results are fallbacks: exit code 0 must not hide them."""
    fallbacks = [a.passage_id for a in result.classifications if a.source == "fallback"]
    if fallbacks:
        err_console.print(
            f"[yellow]warning:[/] {len(fallbacks)} passage(s) got the fallback tier "
            f"{result.scheme.fallback_tier} ({', '.join(fallbacks[:8])}"
            f"{' ...' if len(fallbacks) > 8 else ''}); review items "
            f"{', '.join(map(str, result.review_item_ids))}. "
            f"See: evidex log --run {result.run_id}",
            highlight=False,
        )


@app.command("tier")
@run_flags()
def tier_command(
    query: Annotated[str, query_option("The user's question.")],
    passages: Annotated[
        str,
        passages_option(
            'Retrieved passages, one JSON object a line: {"passage_id": ..., "text": ...} '
            "(id is accepted for passage_id; title, url, rank, score, metadata are optional). "
            "'-' reads stdin."
        ),
    ],
    flags: RunFlags,
    risk: RiskOpt = RiskLevel.LOW,
    batch_size: Annotated[
        int, typer.Option("--batch-size", metavar="N", help="Passages per judge call, 5 to 15.")
    ] = DEFAULT_BATCH,
    tiers: Annotated[
        Path | None,
        tiers_option(
            "Your tier definitions (YAML or JSON), most relevant first. Default: "
            "directly-supporting, contextually-relevant, tangentially-related, irrelevant."
        ),
    ] = None,
    examples: Annotated[
        Path | None,
        examples_option(
            "Few-shot examples (JSON, YAML or JSONL list of query, passage, tier, "
            "justification, key_evidence_snippet). Default: built-in examples for the default "
            "tiers, none for custom tiers."
        ),
    ] = None,
    policy: Annotated[
        Policy | None,
        typer.Option(
            "--policy",
            case_sensitive=False,
            show_default=False,
            help="Also select the generator's context: strict = top tier, standard = top two, "
            "broad = all but the last.",
        ),
    ] = None,
    budget: Annotated[
        int | None,
        unset_option(
            "--budget",
            metavar="TOKENS",
            help=f"Token budget of the selected context (with --policy; default {DEFAULT_BUDGET}).",
        ),
    ] = None,
    prompt: PromptOpt = None,
) -> None:
    """Grade passages into relevance tiers, with a justification and a verbatim snippet.

    Prints JSON: classifications (passage_id, tier, justification, key_evidence_snippet,
    source, reason), tier_summary, events and review_item_ids; with --policy also the selected
    context. A passage whose batch could not be judged gets the fallback tier with
    source "fallback" and a review item; the exit code is still 0, since it has a result.
    """
    if not query.strip():
        raise InputError("the query is empty", where="--query")
    if budget is not None and policy is None:
        raise ConfigError("--budget is the context budget of --policy; give --policy too")
    items = read_passages(passages)
    scheme = TierScheme.from_file(tiers) if tiers else None
    shots = load_examples(examples) if examples else None
    with open_db(flags.db) as store:
        result = run_tier(
            query,
            items,
            store=store,
            judge_spec=flags.judge,
            base_url=flags.base_url,
            judge_option=flags.judge_option,
            tiers=scheme,
            examples=shots,
            risk=risk,
            batch_size=batch_size,
            prompt=prompt,
        )
    report: dict[str, Any] = result.report()
    if policy is not None:
        context = select_context(result, policy.value, DEFAULT_BUDGET if budget is None else budget)
        report["context"] = context.model_dump(mode="json")
    write_json(report, flags.output)
    report_fallbacks(result)
    report_spend([result])
