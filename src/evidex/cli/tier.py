"""``evidex tier``: grade passages into relevance tiers and print the result as JSON."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

from evidex.cli._app import app, err_console, write_json
from evidex.cli._derive import job_flags
from evidex.cli._io import RunFlags, progress, read_passages, run_flags
from evidex.cli._options import PromptOpt, passages_option, query_option
from evidex.cli._spend import report_spend
from evidex.errors import ConfigError, InputError
from evidex.jobs.tier import DEFINITION, ContextChoice, TierOptionsModel, TierResult, tier
from evidex.types import Passage

__all__ = ["run_tier", "tier_command"]


def run_tier(
    query: str,
    passages: Sequence[Passage],
    options: TierOptionsModel,
    *,
    flags: RunFlags,
    prompt: Path | None = None,
) -> TierResult:
    """Run the tier job for a command: build the judge, show progress, close the judge after."""
    size = options.batch_size
    with (
        flags.job("tier") as run,
        progress(math.ceil(len(passages) / size), "tier", "batches") as on_progress,
    ):
        return tier(
            query, passages, **options.values(), **run, on_progress=on_progress, prompt=prompt
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
@job_flags(DEFINITION)
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
    options: TierOptionsModel,
    extras: ContextChoice,
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
    if extras.budget is not None and extras.policy is None:
        raise ConfigError("--budget is the context budget of --policy; give --policy too")
    items = read_passages(passages)
    result = run_tier(query, items, options, flags=flags, prompt=prompt)
    write_json(DEFINITION.respond(result, extras), flags.output)
    report_fallbacks(result)
    report_spend([result])
