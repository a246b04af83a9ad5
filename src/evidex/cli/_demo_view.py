"""How ``evidex demo`` looks: live step progress on stderr and one section per job on stdout.

Kept apart from :mod:`evidex.cli.demo` so the pipeline reads as a plain sequence of library calls.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType

from rich import box
from rich.console import Console
from rich.progress import TaskID
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from evidex.cli._demo_types import INSTALL_HINT, DemoRun, StepNote
from evidex.cli._progress import Clock, rate_line, spinner
from evidex.cli._tables import print_table

__all__ = ["StepProgress", "show_run"]

FALLBACK_TEXT = 200
"""Characters of a fallback's explanation shown in the audit table."""
NARROW = 120
"""Below this many columns the audit table stacks its text columns into one."""

_TIER_STYLE = ["bold green", "cyan", "yellow", "dim"]
_LEVEL_STYLE = {
    "fully_supported": "bold green",
    "partially_supported": "cyan",
    "inferred": "yellow",
    "unsupported": "bold red",
}
_DECISION_STYLE = {"publish": "bold green", "review": "bold yellow", "block": "bold red"}


class StepProgress:
    """Step lines on stderr, with a spinner while a step runs: its judge calls done of the
    total, the seconds a call and the time left as this run measures them
    (:func:`~evidex.cli._progress.rate_line`), and the time so far.

    The spinner is transient: what stays on screen (and in logs) is one line per start, notice,
    end or skip.
    """

    def __init__(self, console: Console, clock: Clock = time.monotonic) -> None:
        self.console = console
        self.bar = spinner(console, clock)
        self.task: TaskID | None = None

    def __enter__(self) -> StepProgress:
        self.bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.bar.stop()

    def note(self, note: StepNote) -> None:
        where = f"[{note.index}/{note.of}] {note.step}"
        judge = f" with {note.judge_id}" if note.judge_id else ""
        say = self.bar.console.print
        if note.status == "start":
            say(Text(f"{where}{judge} ...", style="bold"))
            if note.message:
                say(Text(f"      {note.message}", style="dim"))
            self.task = self.bar.add_task(f"{note.step} running", total=None)
        elif note.status == "progress":
            if self.task is not None and note.done is not None:
                line = rate_line(note.done, note.total, note.seconds or 0.0, "calls")
                self.bar.update(self.task, description=f"{note.step}: {line}", refresh=True)
        elif note.status == "done":
            self._clear()
            say(Text(f"{where} done in {note.seconds:.1f} s"))
        else:
            self._clear()
            say(Text(f"{where} skipped: {note.message}", style="yellow"))

    def _clear(self) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
            self.task = None


def show_run(run: DemoRun, json_file: Path, console: Console | None = None) -> None:
    """The readable report: one section per step, then timings and where the JSON went."""
    console = console or Console()
    console.print(Text.assemble(("Question: ", "bold"), run.example.query))
    judges = " · ".join(f"{job} {judge}" for job, judge in run.judges.items())
    console.print(Text.assemble(("Judges: ", "bold"), judges))
    _rerank(console, run)
    _tiers(console, run)
    _context(console, run)
    for name in run.parts:
        _part(console, run, name)
    _audit(console, run)
    _classify(console, run)
    _footer(console, run, json_file)


def _section(console: Console, title: str) -> None:
    console.print()
    console.print(Rule(Text(title, style="bold"), align="left"))


def _rerank(console: Console, run: DemoRun) -> None:
    r = run.rerank
    _section(console, f"{run.number('rerank')} · Rerank ({r.strategy}, {r.judge_id})")
    titles = {p.passage_id: p.title or "" for p in run.example.passages}
    retrieval = {p.passage_id: p.rank for p in run.example.passages}
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("rank", no_wrap=True)
    # a copy's id says which passage it copies, under it: the title keeps short words
    table.add_column("id")
    table.add_column("score", no_wrap=True)
    # wraps at spaces: the one column that gives way
    table.add_column("title", ratio=1)
    table.add_column("author's tier", no_wrap=True)
    for item in r.ranked_passages:
        score = "—" if item.relevance_score is None else f"{item.relevance_score:.3f}"
        name = Text(item.passage_id)
        if item.duplicate_of:
            score = "copy"
            name.append(f"\nsame text as {item.duplicate_of}", style="dim")
        table.add_row(
            f"{item.rank} ({retrieval.get(item.passage_id, '')})",
            name,
            score,
            titles.get(item.passage_id, ""),
            run.example.expected_tiers.get(item.passage_id, ""),
        )
    print_table(console, table)
    console.print(
        f"Source {r.source}; {r.metrics.inversion_rate:.0%} of passage pairs changed order "
        "against retrieval (the retrieval rank in brackets).",
        highlight=False,
    )


def _tiers(console: Console, run: DemoRun) -> None:
    result = run.tier
    _section(console, f"{run.number('tier')} · Tier ({result.judge_id})")
    names = result.scheme.names
    style = {name: _TIER_STYLE[min(i, len(_TIER_STYLE) - 1)] for i, name in enumerate(names)}
    narrow = console.width < NARROW  # then the snippet heads its justification, as in audit
    table = Table(show_lines=True, box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True)
    if narrow:  # the source goes under the tier, leaving the text a word's width
        table.add_column("tier, source", min_width=max(map(len, names)))
        table.add_column("key evidence, justification", ratio=1, overflow="fold")
    else:
        table.add_column("tier", min_width=max(map(len, names)))
        table.add_column("key evidence", overflow="fold", ratio=1)
        table.add_column("justification", overflow="fold", ratio=2)
        table.add_column("source", no_wrap=True)
    for a in result.classifications:
        expected = run.example.expected_tiers.get(a.passage_id, "")
        cell = Text(a.tier, style=style.get(a.tier, ""))
        if expected and expected != a.tier:
            cell.append(f"\n(author: {expected})", style="red")
        source = Text(a.source, style="bold red" if a.source == "fallback" else "dim")
        snippet = a.key_evidence_snippet or "—"
        if a.duplicate_of:
            snippet += f" (same text as {a.duplicate_of})"
        if narrow:
            text = Text(snippet) + Text("\n" + a.justification, style="dim")
            table.add_row(a.passage_id, cell + Text("\n") + source, text)
        else:
            table.add_row(a.passage_id, cell, snippet, a.justification, source)
    print_table(console, table)
    summary = " · ".join(f"{n} {result.tier_summary[result.scheme.count_key(n)]}" for n in names)
    console.print(Text.assemble(("Tier summary: ", "bold"), summary))
    same, total = run.tier_agreement()
    console.print(
        f"The judge agrees with the author's tiers on {same} of {total} passages "
        "(where they differ, the author's tier is under the judge's).",
        highlight=False,
    )
    _cascade(console, run)


def _cascade(console: Console, run: DemoRun) -> None:
    """The cascade's split of the tier step (or, over an encoder alone, a labelled preview)."""
    view = run.cascade
    if view is None:
        return
    band = f"[{view.band[0]:.3f}, {view.band[1]:.3f}), {view.band_source}"
    saved = view.calls_alone - view.calls_sent
    if view.preview:
        text = (
            f"Cascade preview (no expensive judge ran): with cascade:{view.cheap},EXPENSIVE, "
            f"{view.cheap} would settle {view.settled} of {view.settled + view.sent} passages "
            f"(scored outside the uncertain band {band}) and send {view.sent} to the expensive "
            f"judge: {view.calls_sent} call(s) instead of {view.calls_alone} ({saved} saved). "
            f"Run it with --tier-judge cascade:{view.cheap},openai:MODEL --base-url URL."
        )
    else:
        text = (
            f"Cascade: {view.cheap} settled {view.settled} passages, {view.sent} went to "
            f"{view.expensive} (band {band}): {view.calls_sent} call(s) instead of "
            f"{view.calls_alone} ({saved} saved)."
        )
    console.print(text, highlight=False)


def _context(console: Console, run: DemoRun) -> None:
    context = run.context
    _section(console, f"{run.number('select_context')} · Context for generation (select_context)")
    console.print(
        f"Policy {context.policy}, {context.tokens_used} of {context.token_budget} tokens used "
        "(estimated, 4 characters a token).",
        highlight=False,
    )
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("id", "tier", "tokens", "role"):
        table.add_column(column)
    for item in context.items:
        role = "supplementary" if item.supplementary else "evidence"
        table.add_row(item.passage_id, item.tier, str(item.tokens), role)
    print_table(console, table)
    for gone in context.left_out:
        why = (
            f"over the budget ({gone.tokens} tokens)"
            if gone.reason == "budget"
            else f"the {context.policy} policy excludes {gone.tier}"
        )
        console.print(Text(f"  left out {gone.passage_id}: {why}"))
    merged = [a for a in run.tier.classifications if a.duplicate_of]
    for a in merged:
        console.print(Text(f"  left out {a.passage_id}: same text as {a.duplicate_of}"))


def _part(console: Console, run: DemoRun, name: str) -> None:
    """A later job's step: its cases beside the author's labels."""
    part = run.parts[name]
    _section(console, f"{run.number(name)} · {part.title} ({part.judge_id})")
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("question", ratio=1, overflow="fold")
    table.add_column("author's", no_wrap=True)
    table.add_column("judge's", no_wrap=True)
    table.add_column("decision", ratio=1, overflow="fold")
    for case in part.cases:
        style = "" if case.agrees else "bold red"
        table.add_row(case.case, case.expected, Text(case.judged, style=style), case.detail)
    print_table(console, table)
    same, total = part.agreement()
    console.print(f"The judge agrees with the author on {same} of {total}.", highlight=False)


def _audit(console: Console, run: DemoRun) -> None:
    _section(
        console,
        f"{run.number('audit')} · Audit of the generated answer against the selected context",
    )
    result = run.audit
    if result is None:
        _skipped(console, run, "audit")
        return
    console.print(Text.assemble(("Judge: ", "bold"), result.judge_id, f" · run {result.run_id}"))
    # Under NARROW columns the two grades share one column and the claim heads its evidence:
    # five columns at 80 would leave the text a few characters wide, cut mid-word.
    narrow = console.width < NARROW
    table = Table(show_lines=True, box=box.SIMPLE_HEAD)
    table.add_column("#", no_wrap=True)
    if narrow:
        table.add_column("judge / author", min_width=len("✓ partially_supported"))
        table.add_column("claim, evidence and explanation", ratio=1, overflow="fold")
    else:
        table.add_column("claim", overflow="fold", ratio=2)
        table.add_column("judge", min_width=len("partially_supported"))
        table.add_column("author", min_width=len("partially_supported"))
        table.add_column("evidence and explanation", overflow="fold", ratio=3)
    judged = {c.claim_text: c for c in result.claims}
    for i, check in enumerate(run.claim_checks(), 1):
        got = judged.get(check.claim)
        mark = Text("✓ " if check.agrees else "✗ ", style="green" if check.agrees else "red")
        judge_cell = mark + _level(check.judged, check.contradicted)
        author_cell = _level(check.expected, check.expected_contradicted)
        detail = Text()
        if got is not None:
            if got.supporting_context_ids:
                detail.append(", ".join(got.supporting_context_ids) + ": ", style="bold")
            for quote in got.supporting_quotes:
                detail.append(f"\u201c{quote}\u201d\n")
            if got.contradicting_quote:
                detail.append("contradicted by: ", style="bold red")
                detail.append(f"\u201c{got.contradicting_quote}\u201d\n")
            explanation = got.explanation
            if got.source == "fallback" and len(explanation) > FALLBACK_TEXT:
                # a fallback explains itself with every validation error of its batch; the
                # review queue and the JSON keep them all
                explanation = explanation[:FALLBACK_TEXT].rstrip() + " … (the rest in the JSON)"
            detail.append(explanation, style="dim")
            if got.source != "judge":
                detail.append(
                    f" [{got.source}]", style="bold red" if got.source == "fallback" else ""
                )
        if narrow:
            grades = judge_cell + Text("\nauthor: ", style="dim") + author_cell
            table.add_row(str(i), grades, Text(check.claim, style="bold") + "\n" + detail)
        else:
            table.add_row(str(i), check.claim, judge_cell, author_cell, detail)
    print_table(console, table)
    checks = run.claim_checks()
    console.print(
        f"The judge agrees with the author on {sum(c.agrees for c in checks)} of {len(checks)} "
        "claims (three were planted: one contradicts the passages, two have no support).",
        highlight=False,
    )
    decision = result.decision
    line = Text("Decision: ", style="bold")
    line.append(decision.decision.upper(), style=_DECISION_STYLE.get(decision.decision, "bold"))
    line.append(f" (unsupported ratio {decision.unsupported_ratio:.0%}); the author expected ")
    expected = run.example.answer.expected_decision
    line.append(expected.upper(), style=_DECISION_STYLE.get(expected, "bold"))
    console.print(line)
    for reason in decision.reasons:
        console.print(Text(f"  {reason.code}: {reason.message}"))
    if result.review_item_ids:
        console.print(Text(f"  review items: {', '.join(map(str, result.review_item_ids))}"))


def _level(level: str | None, contradicted: bool | None) -> Text:
    if level is None:
        return Text("not graded", style="red")
    text = Text(level, style=_LEVEL_STYLE.get(level, ""))
    if contradicted:
        text.append("\ncontradicted", style="bold red")
    return text


def _classify(console: Console, run: DemoRun) -> None:
    _section(
        console, f"{run.number('classify')} · Classify a support ticket from retrieved passages"
    )
    example = run.example.classify
    console.print(Text.assemble(("Input: ", "bold"), example.input))
    console.print(Text.assemble(("Labels: ", "bold"), ", ".join(example.taxonomy.names)))
    console.print(Text.assemble(("Passages: ", "bold"), ", ".join(example.passage_ids)))
    result = run.classify
    if result is None:
        _skipped(console, run, "classify")
        return
    console.print(Text.assemble(("Judge: ", "bold"), result.judge_id, f" · run {result.run_id}"))
    if result.unclassifiable:
        console.print(
            Text(
                f"unclassifiable: {result.unclassifiable_reason or 'no reason given'}",
                style="yellow",
            )
        )
    for a in result.classifications:
        console.print(
            Text.assemble(
                ("  label ", ""), (a.label, "bold green"), f"  confidence {a.confidence:.2f}"
            )
        )
        for e in a.supporting_evidence:
            console.print(Text(f"    + {e.passage_id}: \u201c{e.quoted_text}\u201d  {e.rationale}"))
        for e in a.counter_evidence:
            console.print(Text(f"    - {e.passage_id}: \u201c{e.quoted_text}\u201d  {e.rationale}"))
    if result.evidence_gaps:
        console.print(Text("  evidence gaps: " + "; ".join(result.evidence_gaps), style="dim"))
    if result.source == "fallback":
        console.print(Text(f"  fallback: {result.reason}", style="bold red"))
    for routed in result.review:
        console.print(Text(f"  review item {routed.review_item_id}: {routed.reason}"))
    agrees = run.label_agreement()
    expected = ", ".join(example.expected_labels)
    console.print(
        f"The author expected {expected}: the judge {'agrees' if agrees else 'disagrees'}.",
        highlight=False,
    )


def _skipped(console: Console, run: DemoRun, step: str) -> None:
    for skipped in run.skipped:
        if skipped.step == step:
            console.print(Text(f"Skipped: {skipped.reason}", style="yellow"))


def _footer(console: Console, run: DemoRun, json_file: Path) -> None:
    console.print()
    console.print(Rule(style="dim"))
    timings = ", ".join(f"{t.step} {t.seconds:.1f} s" for t in run.timings)
    total = sum(t.seconds for t in run.timings)
    console.print(f"Time: {timings} (total {total:.1f} s).", highlight=False)
    console.print(f"Full result: {json_file}", highlight=False)
    runs = [("rerank", run.rerank.run_id), ("tier", run.tier.run_id)]
    runs += [
        (step, r.run_id) for step, r in (("audit", run.audit), ("classify", run.classify)) if r
    ]
    runs += [
        (name, case.report["run_id"])
        for name, part in run.parts.items()
        for case in part.cases
        if case.report.get("run_id")
    ]
    console.print(
        Text(
            "Audit log: evidex log --run ID, with the run ids "
            + ", ".join(f"{step} {run_id}" for step, run_id in runs)
            + " · review queue: evidex review list",
            style="dim",
        )
    )
    fallbacks = run.fallbacks()
    if fallbacks:
        parts = ", ".join(f"{step} {n}" for step, n in fallbacks.items())
        console.print(Text(f"Fallbacks (see the review queue): {parts}", style="bold yellow"))
    if run.skipped:
        names = [s.step for s in run.skipped]
        steps = " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))
        console.print(
            Text(
                f"This was a partial run: {steps} need the embedded LLM. Install it with "
                f"{INSTALL_HINT}, then run evidex demo again.",
                style="bold yellow",
            )
        )
