"""``evidex demo``: the jobs on one bundled example, offline, with the embedded judges.

The example (``evidex/data/examples/demo.json``) is a Kubernetes question with fifteen retrieved
passages, a generated answer with planted mistakes, and a support ticket to classify. The
pipeline is the one of the design: rerank → tier → select_context → the later jobs' own steps on
that context (each job's definition declares its step, :class:`evidex.jobs.DemoPart`: the check
before generating) → audit of the answer against the selected context, then classify. Every
step is a public library call, so the demo is also a worked example of the API; the author's
expected labels are shown next to the judges' so the demo also shows where a judge disagrees.

Judges: ``local:minilm`` reranks and tiers (the encoder takes seconds for fifteen passages,
where ``local:qwen`` took over three minutes for one batch of five on these 2-core machines, see
``docs/benchmarks.md``), ``local:qwen`` audits and classifies. Without the ``llm`` extra the two
LLM steps are skipped with the install hint and the run still succeeds: the encoder steps alone
are a useful first look.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

import evidex
from evidex.cli._app import app, err_console, renamed, writable_output, write_json
from evidex.cli._demo_types import (
    INSTALL_HINT,
    CascadeView,
    DemoClaim,
    DemoExample,
    DemoPartRun,
    DemoRun,
    SkippedStep,
    StepNote,
    StepTiming,
    load_demo,
)
from evidex.cli._demo_view import StepProgress, show_run
from evidex.cli._io import RunFlags, echo_hooks, open_db, run_flags
from evidex.cli._judge import BaseUrls, endpoint_options, takes_base_url
from evidex.cli._options import unset_option
from evidex.errors import ConfigError, MissingExtraError
from evidex.harness.events import Hooks
from evidex.harness.ports import StorePort
from evidex.jobs import (
    DemoInputs,
    DemoPart,
    definitions,
    judge_key,
    resolve_judge,
    run_sync,
)
from evidex.jobs.tier import DEFAULT_BATCH
from evidex.judges.cascade import TierScorer, load_band
from evidex.judging import Judge
from evidex.types import Passage

__all__ = [
    "DEMO_JUDGES",
    "INSTALL_HINT",
    "DemoClaim",
    "DemoExample",
    "DemoRun",
    "SkippedStep",
    "StepNote",
    "demo_command",
    "load_demo",
    "run_demo",
]

DEMO_POLICY = "standard"
DEMO_BUDGET = 300
"""Tokens of generator context (estimated): with the author's tiers, the three answering
passages and two of the four background ones fit, so passages are left out for the budget as
well as by the policy."""
DEMO_JSON = Path("evidex-demo.json")
DEMO_JUDGES: dict[str, str] = {
    "rerank": "local:minilm",
    "tier": "local:minilm",
    "audit": "local:qwen",
    "classify": "local:qwen",
}
LLM_STEPS = ("audit", "classify")
"""Steps skipped, not failed, when their judge needs an extra that is not installed."""
LLM_TIMEOUT_S = 1800.0
"""Per-call timeout of the LLM steps: a CPU model on a busy machine can need many minutes for one
call, and a timed-out call would only be asked again from the start."""

# ---------------------------------------------------------------------------- the run

Listener = Callable[[StepNote], None]
FIRST_STEPS = ("rerank", "tier", "select_context")
LAST_STEPS = ("audit", "classify")


def demo_parts() -> dict[str, DemoPart]:
    """The later jobs' demo steps (their definitions' ``demo``), by job name, in registry
    order: they run on the selected context, before the audit of the generated answer."""
    return {d.name: d.demo for d in definitions() if d.demo is not None}


def demo_steps() -> list[str]:
    """Every step of the demo in run order."""
    return [*FIRST_STEPS, *demo_parts(), *LAST_STEPS]


def run_demo(
    judges: Mapping[str, Judge | str] | None = None,
    *,
    store: StorePort | str | None = None,
    hooks: Hooks | None = None,
    budget: int = DEMO_BUDGET,
    base_url: BaseUrls = None,
    example: DemoExample | None = None,
    on_step: Listener | None = None,
) -> DemoRun:
    """Run the demo pipeline and return every result.

    ``judges`` maps a job (rerank, tier, audit, classify) to a judge or a spec string; missing
    jobs get :data:`DEMO_JUDGES`. Judges built here from specs are closed at the end; given
    instances stay the caller's. ``hooks`` sees every audit record of every step. ``base_url``
    goes to ``openai:`` specs only. When the audit or classify judge needs an extra that is not
    installed, that step is skipped (see :attr:`DemoRun.skipped`) instead of failing the run;
    any other error propagates.
    """
    demo = example or load_demo()
    parts = demo_parts()
    steps = demo_steps()
    judged = {**DEMO_JUDGES, **{name: part.judge for name, part in parts.items()}}
    defaults = {step: judged[step] for step in steps if step in judged}  # in run order
    specs = {**defaults, **dict(judges or {})}
    unknown = sorted(set(specs) - set(defaults))
    if unknown:
        raise ConfigError(f"unknown demo step(s) {unknown}; judges are chosen for {list(defaults)}")
    notify = on_step or (lambda note: None)

    def skip(name: str, why: str) -> None:
        notify(
            StepNote(
                step=name, status="skipped", index=steps.index(name) + 1, of=len(steps), message=why
            )
        )

    with _judges(specs, base_url, (*LLM_STEPS, *parts)) as (built, skipped):
        timings: list[StepTiming] = []

        def step(name: str, judge: Judge | None, notice: str | None = None) -> _Clock:
            return _Clock(name, judge, notice, notify, timings, steps)

        with step("rerank", built["rerank"]) as clock:
            reranked = evidex.rerank(
                demo.query,
                demo.passages,
                strategy="pointwise",
                top_k=len(demo.passages),
                judge=built["rerank"],
                store=store,
                hooks=hooks,
                on_progress=clock.progress,
            )
        order = {p.passage_id: p for p in demo.passages}
        with step("tier", built["tier"]) as clock:
            tiered = evidex.tier(
                demo.query,
                [order[pid] for pid in reranked.ids()],
                judge=built["tier"],
                store=store,
                hooks=hooks,
                on_progress=clock.progress,
            )
        cascade = _cascade_view(built["tier"], tiered, demo.query)
        with step("select_context", None):
            context = evidex.select_context(tiered, DEMO_POLICY, budget)
        run = DemoRun(
            example=demo,
            judges={job: _judge_name(built.get(job), specs[job]) for job in specs},
            rerank=reranked,
            tier=tiered,
            context=context,
            skipped=[
                SkippedStep(step=s, judge=str(specs[s]), reason=r) for s, r in skipped.items()
            ],
            cascade=cascade,
            steps=steps,
        )
        # what the LLM steps are run with, besides their judge
        llm: dict[str, Any] = {
            "store": store,
            "hooks": hooks,
            "settings": evidex.HarnessSettings(timeout_s=LLM_TIMEOUT_S),
        }
        selected = [_with_title(demo, item.passage_id, item.text) for item in context.items]
        for name, part in parts.items():
            if name not in built:
                skip(name, skipped[name])
                continue
            judge = built[name]
            count = len(demo.steps.get(name, {}).get("cases", []))
            with step(name, judge, _cpu_notice(judge, f"{count} check(s)")) as clock:
                inputs = DemoInputs(demo.query, selected, demo.steps.get(name, {}))
                cases = part.run(inputs, judge, {**llm, "on_progress": clock.progress})
            run.parts[name] = DemoPartRun(title=part.title, judge_id=judge.judge_id, cases=cases)
        if "audit" in built:
            judge = built["audit"]
            claims = f"{len(demo.answer.claims)} claims in one call"
            with step("audit", judge, _cpu_notice(judge, claims)) as clock:
                run.audit = evidex.audit(
                    demo.answer.text,
                    selected,
                    answer_id=demo.answer.answer_id,
                    question=demo.query,
                    claims=[c.claim for c in demo.answer.claims],
                    judge=judge,
                    on_progress=clock.progress,
                    **llm,
                )
        else:
            skip("audit", skipped["audit"])
        if "classify" in built:
            judge = built["classify"]
            with step("classify", judge, _cpu_notice(judge, "one call")) as clock:
                run.classify = evidex.classify(
                    demo.classify.input,
                    [demo.passage(pid) for pid in demo.classify.passage_ids],
                    demo.classify.taxonomy,
                    judge=judge,
                    on_progress=clock.progress,
                    **llm,
                )
        else:
            skip("classify", skipped["classify"])
        run.timings = timings
        return run


@contextmanager
def _judges(
    specs: Mapping[str, Judge | str], base_url: BaseUrls, skippable: Sequence[str]
) -> Iterator[tuple[dict[str, Judge], dict[str, str]]]:
    """Build each job's judge as the library would (its spec with the options the job
    registers for it, :func:`~evidex.jobs.judge_defaults`: ``local:qwen`` audits and
    classifies in score mode), once per spec and options (rerank and tier share one encoder,
    audit and classify one model), note the ``skippable`` steps whose judge's extra is
    missing, and close what was built here when the run ends."""
    endpoints = endpoint_options(base_url)
    if endpoints and not any(isinstance(s, str) and takes_base_url(s) for s in specs.values()):
        raise ConfigError("--base-url applies to openai: judges only, and no step uses one")
    by_spec: dict[tuple[str, str], Judge] = {}
    built: dict[str, Judge] = {}
    skipped: dict[str, str] = {}
    try:
        for job, spec in specs.items():
            if isinstance(spec, Judge):
                built[job] = spec
                continue
            name = spec.strip()
            key = judge_key(job, name)
            if key not in by_spec:
                options = endpoints if takes_base_url(name) else {}
                try:
                    by_spec[key] = resolve_judge(name, job, **options)
                except MissingExtraError as exc:
                    if job not in skippable:
                        raise
                    skipped[job] = str(exc)
                    continue
            built[job] = by_spec[key]
            if not built[job].supports(job):
                raise ConfigError(f"judge {name} cannot do the {job} job")
        yield built, skipped
    finally:
        for judge in by_spec.values():
            run_sync(judge.aclose())


def _cascade_view(judge: Judge, tiered: evidex.TierResult, query: str) -> CascadeView | None:
    """The tier step's cascade split: the real one when the tier judge is a cascade, else, for
    an encoder with a shipped band, a preview of what a cascade over it would send on (the
    encoder scores the passages again, about a second; no expensive judge runs)."""
    report = tiered.cascade
    batch = DEFAULT_BATCH
    if report is not None:
        return CascadeView(
            preview=False,
            cheap=report.cheap,
            expensive=report.expensive,
            band=report.band,
            band_source=report.band_source,
            settled=report.settled,
            sent=report.sent,
            calls_alone=-(-report.items // batch),
            calls_sent=-(-report.sent // batch),
        )
    band = load_band(None, judge.judge_id) if isinstance(judge, TierScorer) else None
    if band is None or not isinstance(judge, TierScorer):
        return None
    passages = tiered.passages
    scores = judge.score(query, [p.text for p in passages])
    sent = sum(band.uncertain(s) for s in scores)
    return CascadeView(
        preview=True,
        cheap=judge.judge_id,
        expensive=None,
        band=(band.low, band.high),
        band_source="shipped default",
        settled=len(passages) - sent,
        sent=sent,
        calls_alone=-(-len(passages) // batch),
        calls_sent=-(-sent // batch),
    )


def _judge_name(judge: Judge | None, spec: Judge | str) -> str:
    if judge is not None:
        return judge.judge_id
    return spec.judge_id if isinstance(spec, Judge) else spec


def _with_title(demo: DemoExample, passage_id: str, text: str) -> Passage:
    """A selected passage as the generator saw it: its text from the context, its title kept."""
    return Passage(passage_id=passage_id, text=text, title=demo.passage(passage_id).title)


def _cpu_notice(judge: Judge, what: str) -> str | None:
    """What to know before an embedded-LLM step: it runs on this machine's CPU (its progress
    line then gives the calls done, the seconds a call and the time left, as this run
    measures them)."""
    if not judge.judge_id.startswith("local:qwen"):
        return None
    return (
        f"{what} to {judge.judge_id} on this machine's CPU; the first use also joins the model "
        "weights into the cache dir (on a machine busy with other work, EVIDEX_QWEN_THREADS=1 "
        "can be much faster)"
    )


@dataclass
class _Clock:
    """Times one step and reports its start and end to the listener."""

    step: str
    judge: Judge | None
    notice: str | None
    notify: Listener
    timings: list[StepTiming]
    steps: Sequence[str]
    started: float = 0.0

    def __enter__(self) -> _Clock:
        self.started = time.perf_counter()
        judge_id = self.judge.judge_id if self.judge else None
        self.notify(self._note("start", judge_id=judge_id, message=self.notice))
        return self

    def progress(self, done: int, total: int) -> None:
        """The step's ``on_progress``: its calls done of the total, as they advance."""
        seconds = time.perf_counter() - self.started
        self.notify(self._note("progress", done=done, total=total, seconds=seconds))

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            return
        seconds = round(time.perf_counter() - self.started, 2)
        judge_id = self.judge.judge_id if self.judge else None
        self.timings.append(StepTiming(step=self.step, judge_id=judge_id, seconds=seconds))
        self.notify(self._note("done", judge_id=judge_id, seconds=seconds))

    def _note(self, status: Literal["start", "progress", "done"], **fields: Any) -> StepNote:
        return StepNote(
            step=self.step,
            status=status,
            index=self.steps.index(self.step) + 1,
            of=len(self.steps),
            **fields,
        )


# ---------------------------------------------------------------------------- the command


def _step_judge(step: str) -> Any:
    """The ``--STEP-judge`` option of one step, its default named in the help."""
    return unset_option(
        f"--{step}-judge",
        metavar="SPEC",
        help=f"Judge of the {step} step. Default: {DEMO_JUDGES[step]}.",
    )


@app.command("demo")
@run_flags("base_url", "db", "verbose")
def demo_command(
    flags: RunFlags,
    judge: Annotated[
        str | None,
        unset_option(
            "--judge",
            "-j",
            metavar="SPEC",
            help="One judge for every step (e.g. openai:MODEL with --base-url); the per-step "
            "options below win over it.",
        ),
    ] = None,
    rerank_judge: Annotated[str | None, _step_judge("rerank")] = None,
    tier_judge: Annotated[str | None, _step_judge("tier")] = None,
    audit_judge: Annotated[str | None, _step_judge("audit")] = None,
    classify_judge: Annotated[str | None, _step_judge("classify")] = None,
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            metavar="TOKENS",
            min=1,
            help=f"Token budget of the {DEMO_POLICY} context selection that the audit reads.",
        ),
    ] = DEMO_BUDGET,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            dir_okay=False,
            callback=writable_output,
            show_default=False,
            help=f"Where to write the full result as JSON (default: {DEMO_JSON}).",
        ),
    ] = None,
    old_json: Annotated[
        Path | None,
        typer.Option("--json", metavar="FILE", hidden=True, help="The old --output."),
    ] = None,
) -> None:
    """Run the jobs on a bundled example, offline: rerank, tier, context, check, audit, classify.

    A Kubernetes question with fifteen retrieved passages is reranked and tiered by the
    embedded encoder (local:minilm), the generator's context is picked under a token budget,
    two questions are checked against that context before generating (one it answers, one it
    does not), a generated answer with planted mistakes is audited against that context and a
    support ticket is classified, all three by the embedded LLM (local:qwen, on the CPU; each
    step's line gives its calls done and the time left as the run measures them). Each step is
    shown next to the example author's labels. Without the llm extra the LLM steps are skipped
    with the command that installs it.
    """
    json_file = renamed("--output", output, "--json FILE", old_json) or DEMO_JSON
    chosen = {
        job: spec
        for job, spec in {
            "rerank": rerank_judge or judge,
            "tier": tier_judge or judge,
            "audit": audit_judge or judge,
            "classify": classify_judge or judge,
            **dict.fromkeys(demo_parts(), judge),
        }.items()
        if spec
    }
    with open_db(flags.db) as store, StepProgress(err_console) as progress:
        run = run_demo(
            chosen,
            store=store,
            hooks=echo_hooks(),
            budget=budget,
            base_url=flags.base_url,
            on_step=progress.note,
        )
    show_run(run, json_file)
    write_json(run.report(), json_file)
