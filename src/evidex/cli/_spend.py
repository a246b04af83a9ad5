"""The one line a job command prints on stderr when it is done: what the run spent.

Judge calls, attempts, tokens in and out over every attempt (re-asks included), and the
estimated cost when the configured price table names the judge (``[prices]`` in the config
file, see :mod:`evidex.pricing`). A cascade judge's tier results add its split: the items its
cheap stage settled, those it sent on, and the calls (and priced cost) that saved. stdout stays
the result alone, so pipes are unaffected.
"""

from __future__ import annotations

from collections.abc import Sequence

from evidex.cli._app import err_console
from evidex.harness.job import JobResult

__all__ = ["report_spend", "spend_line"]


def spend_line(results: Sequence[JobResult]) -> str:
    """The summary of one or many results of a command (a batch is summed)."""
    calls = sum(r.judge_calls for r in results)
    attempts = sum(r.attempts for r in results)
    tokens_in = sum(r.usage.prompt_tokens for r in results)
    tokens_out = sum(r.usage.completion_tokens for r in results)
    judges = sorted({r.judge_id for r in results})
    line = (
        f"{', '.join(judges)}: {calls} judge call(s), {attempts} attempt(s), "
        f"tokens {tokens_in} in / {tokens_out} out"
    )
    costs = [r.cost for r in results]
    if costs and all(c is not None for c in costs):
        line = f"{line}, est. cost {sum(c for c in costs if c is not None):.6f}"
    return line + _cascade_part(results)


def _cascade_part(results: Sequence[JobResult]) -> str:
    reports = [c for c in (getattr(r, "cascade", None) for r in results) if c is not None]
    if not reports:
        return ""
    settled, sent = sum(c.settled for c in reports), sum(c.sent for c in reports)
    part = (
        f"; cascade: {settled} settled by {reports[0].cheap}, {sent} sent to "
        f"{reports[0].expensive}, {sum(c.calls_saved for c in reports)} call(s) saved"
    )
    saved = [c.cost_saved for c in reports]
    if all(c is not None for c in saved):
        part += f" (est. {sum(c for c in saved if c is not None):.6f})"
    return part


def report_spend(results: Sequence[JobResult]) -> None:
    """Print :func:`spend_line` on stderr (nothing for no results)."""
    if results:
        err_console.print(spend_line(results), highlight=False, markup=False)
