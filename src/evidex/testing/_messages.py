"""The failure messages of the assertions: what failed, and the judge's reasons, as a person
reading a test report needs them.

A message opens with one line saying what was asserted and how it failed, then lists the
claims or passages one a line with a mark (``✗`` failed, ``✓`` passed, ``·`` shown for
context), each followed by the judge's reasons indented below it (its status, justification,
quotes, and for a fallback why it fell back), and ends with where the judgment came from
(judge, prompt version, run id in the audit log). Texts are cut to a readable length and
shown quoted; nothing here calls a judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["claim_lines", "footer", "quoted", "ranking_lines"]

_TEXT = 160
"""Characters of a passage, claim or reason shown before it is cut."""


def quoted(text: str | None, limit: int = _TEXT) -> str:
    """``text`` on one line, cut to ``limit`` characters, in double quotes."""
    flat = " ".join((text or "").split())
    return '"' + (flat[:limit] + "..." if len(flat) > limit else flat) + '"'


def footer(result: Any) -> str:
    """Where the judgment came from: judge, prompt version, audit-log run id, calls made."""
    return (
        f"judged by {result.judge_id} (prompt {result.prompt_version}, run {result.run_id}, "
        f"{result.judge_calls} judge call{'s' * (result.judge_calls != 1)}"
        f"{'' if result.judge_calls else ': from the cache'})"
    )


def claim_lines(result: Any, failing: Iterable[int]) -> list[str]:
    """Every claim of an audit in answer order, the failing ones (by index) marked ``✗``
    with the judge's explanation, the part it found unsupported, the contradicting quote or
    the reason of a fallback; the others marked ``✓`` with the passages that support them."""
    bad = set(failing)
    lines = []
    for i, claim in enumerate(result.claims):
        status = claim.classification + (", contradicted" if claim.contradicted else "")
        if claim.source == "fallback":
            status = f"fell back to {claim.classification}"
        if i not in bad:
            cited = ", ".join(claim.supporting_context_ids)
            lines.append(
                f"  ✓ {status}: {quoted(claim.claim_text)}" + (f" [{cited}]" if cited else "")
            )
            continue
        lines.append(f"  ✗ {status}: {quoted(claim.claim_text)}")
        if claim.source == "fallback":
            lines.append(f"      why it fell back: {claim.reason or 'no reason given'}")
        if claim.unsupported_part:
            lines.append(f"      unsupported part: {quoted(claim.unsupported_part)}")
        if claim.contradicting_quote:
            lines.append(f"      contradicting quote: {quoted(claim.contradicting_quote)}")
        for pid, quote in zip(claim.supporting_context_ids, claim.supporting_quotes, strict=False):
            lines.append(f"      supporting quote [{pid}]: {quoted(quote)}")
        lines.append(f"      the judge: {quoted(claim.explanation, 300)}")
    for span in getattr(result, "unaudited", []):
        lines.append(f"  ✗ not audited (characters {span.start}-{span.end}): {span.reason}")
    return lines


def ranking_lines(result: Any, top: int, missing: Sequence[str], named: Sequence[str]) -> list[str]:
    """The ranking down to the last named passage (at least ``top`` places), a rule under the
    top ``top``: each place with its rank, id, score and the judge's justification; the named
    passages marked ``✓`` inside the top and ``✗`` below it."""
    ranked = list(result.ranked_passages)
    ranks = {p.passage_id: p.rank for p in ranked}
    last = max([top, *(ranks.get(pid, 0) for pid in named)])
    lines = ["  ranking, best first (rank, id, score, the judge's justification):"]
    for place in ranked[:last]:
        mark = " "
        if place.passage_id in named:
            mark = "✗" if place.passage_id in missing else "✓"
        score = "" if place.relevance_score is None else f" {place.relevance_score:.2f}"
        why = place.excluded or place.justification
        lines.append(f"  {mark} {place.rank:>3}  {place.passage_id}{score}  {quoted(why, 120)}")
        if place.source == "fallback" or place.reason:
            source = place.source or "placed by no judge"
            lines.append(f"         ({source}: {place.reason or 'no reason given'})")
        if place.rank == top and last > top:
            lines.append(f"  ---- top {top} ----")
    absent = [pid for pid in missing if pid not in ranks]
    if absent:
        lines.append(f"  not among the ranked passages at all: {', '.join(absent)}")
    return lines
