"""``evidex demo``: the four jobs on one bundled example, offline, with the embedded judges.

The example (``evidex/data/examples/demo.json``) is a Kubernetes question with fifteen retrieved
passages, a generated answer with planted mistakes, and a support ticket to classify. The
pipeline is the one of the design: rerank → tier → select_context → audit of the answer against
the selected context, then classify. Every step is a public library call, so the demo is also a
worked example of the API; the author's expected labels are shown next to the judges' so the
demo also shows where a judge disagrees.

Judges: ``local:minilm`` reranks and tiers (the encoder takes seconds for fifteen passages,
where ``local:qwen`` took over three minutes for one batch of five on these 2-core machines, see
``docs/benchmarks.md``), ``local:qwen`` audits and classifies. Without the ``llm`` extra the two
LLM steps are skipped with the install hint and the run still succeeds: the encoder steps alone
are a useful first look.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel, ConfigDict, Field

import evidex
from evidex.cli._app import app, err_console, write_json
from evidex.cli._io import BaseUrlOpt, DbOpt, EchoStore, VerboseOpt, open_db, verbose_logging
from evidex.errors import ConfigError, MissingExtraError
from evidex.harness.ports import StorePort
from evidex.jobs._common import run_sync
from evidex.judging import Judge
from evidex.taxonomy import Taxonomy
from evidex.types import Passage

__all__ = [
    "DEMO_JUDGES",
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
JUDGE_OPTIONS: dict[str, dict[str, Any]] = {"local:qwen": {"n_ctx": 8192}}
"""Options for judges the demo builds from a spec. An 8192-token window lets local:qwen grade
the answer's six claims in one call with room for a retry; in its default 4096 window the audit
job splits them into three calls, each paying again for the ~1,300-token prompt."""
INSTALL_HINT = "make llm (in a clone of the repository) or pip install 'evidex[llm]'"

# ---------------------------------------------------------------------------- the example


class DemoClaim(BaseModel):
    """One sentence of the demo answer with the author's grade of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: str
    expected: Literal["fully_supported", "partially_supported", "inferred", "unsupported"]
    contradicted: bool = False
    evidence: list[str] = Field(default_factory=list)
    note: str


class DemoAnswer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    answer_id: str
    text: str
    claims: list[DemoClaim]
    expected_decision: Literal["publish", "review", "block"]


class DemoClassify(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str
    passage_ids: list[str]
    taxonomy: Taxonomy
    expected_labels: list[str]


class DemoExample(BaseModel):
    """The bundled example: retrieval result, answer to audit, ticket to classify, and the
    author's expected labels for each."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str
    query: str
    passages: list[Passage]
    expected_tiers: dict[str, str]
    answer: DemoAnswer
    classify: DemoClassify

    def passage(self, passage_id: str) -> Passage:
        for p in self.passages:
            if p.passage_id == passage_id:
                return p
        raise KeyError(passage_id)


def load_demo() -> DemoExample:
    """The bundled example, read from package data."""
    raw = resources.files("evidex").joinpath("data/examples/demo.json").read_text("utf-8")
    return DemoExample.model_validate(json.loads(raw))


# ---------------------------------------------------------------------------- the run


class StepNote(BaseModel):
    """A progress report: a step started (with its judge and a time notice), ended or was
    skipped."""

    step: str
    status: Literal["start", "done", "skipped"]
    index: int
    of: int
    judge_id: str | None = None
    seconds: float | None = None
    message: str | None = None


class SkippedStep(BaseModel):
    step: str
    judge: str
    reason: str


class StepTiming(BaseModel):
    step: str
    judge_id: str | None
    seconds: float


class ClaimCheck(BaseModel):
    """The judge's grade of one claim beside the author's."""

    claim: str
    expected: str
    expected_contradicted: bool
    judged: str | None
    contradicted: bool | None
    agrees: bool


class DemoRun(BaseModel):
    """Everything the demo computed; :meth:`report` is the JSON written next to the tables."""

    example: DemoExample
    judges: dict[str, str]
    rerank: evidex.RerankResult
    tier: evidex.TierResult
    context: evidex.SelectedContext
    audit: evidex.AuditResult | None = None
    classify: evidex.ClassifyResult | None = None
    skipped: list[SkippedStep] = Field(default_factory=list)
    timings: list[StepTiming] = Field(default_factory=list)

    def tier_agreement(self) -> tuple[int, int]:
        """(passages whose tier is the author's, passages)."""
        rows = self.tier.classifications
        same = sum(self.example.expected_tiers.get(a.passage_id) == a.tier for a in rows)
        return same, len(rows)

    def claim_checks(self) -> list[ClaimCheck]:
        """The author's claims in answer order, each with the judge's grade (matched by text)."""
        judged = {c.claim_text: c for c in (self.audit.claims if self.audit else [])}
        checks = []
        for planted in self.example.answer.claims:
            got = judged.get(planted.claim)
            checks.append(
                ClaimCheck(
                    claim=planted.claim,
                    expected=planted.expected,
                    expected_contradicted=planted.contradicted,
                    judged=got.classification if got else None,
                    contradicted=got.contradicted if got else None,
                    agrees=got is not None
                    and got.classification == planted.expected
                    and got.contradicted == planted.contradicted,
                )
            )
        return checks

    def label_agreement(self) -> bool | None:
        if self.classify is None:
            return None
        return sorted(self.classify.labels) == sorted(self.example.classify.expected_labels)

    def fallbacks(self) -> dict[str, int]:
        """Steps whose results (or parts of them) are fallbacks, with how many."""
        counts = {
            "rerank": int(self.rerank.source == "fallback"),
            "tier": sum(a.source == "fallback" for a in self.tier.classifications),
            "audit": sum(c.source == "fallback" for c in self.audit.claims) if self.audit else 0,
            "classify": int(self.classify is not None and self.classify.source == "fallback"),
        }
        return {step: n for step, n in counts.items() if n}

    def report(self) -> dict[str, Any]:
        """The full JSON: every job's own report plus the comparisons with the author's labels."""
        same, total = self.tier_agreement()
        checks = self.claim_checks()
        return {
            "question": self.example.query,
            "answer": self.example.answer.text,
            "judges": self.judges,
            "rerank": self.rerank.report(),
            "tier": self.tier.report()
            | {"expected_tiers": self.example.expected_tiers, "agreement": [same, total]},
            "context": self.context.model_dump(mode="json"),
            "audit": None
            if self.audit is None
            else self.audit.report()
            | {
                "expected": [c.model_dump(mode="json") for c in checks],
                "agreement": [sum(c.agrees for c in checks), len(checks)],
            },
            "classify": None
            if self.classify is None
            else self.classify.report()
            | {
                "classify_input": self.example.classify.input,
                "expected_labels": self.example.classify.expected_labels,
                "agrees": self.label_agreement(),
            },
            "skipped": [s.model_dump() for s in self.skipped],
            "timings": [t.model_dump() for t in self.timings],
        }


Listener = Callable[[StepNote], None]
STEPS = ("rerank", "tier", "select_context", "audit", "classify")


def run_demo(
    judges: Mapping[str, Judge | str] | None = None,
    *,
    store: StorePort | str | None = None,
    budget: int = DEMO_BUDGET,
    base_url: str | None = None,
    example: DemoExample | None = None,
    on_step: Listener | None = None,
) -> DemoRun:
    """Run the demo pipeline and return every result.

    ``judges`` maps a job (rerank, tier, audit, classify) to a judge or a spec string; missing
    jobs get :data:`DEMO_JUDGES`. Judges built here from specs are closed at the end; given
    instances stay the caller's. ``base_url`` goes to ``openai:`` specs only. When the audit or
    classify judge needs an extra that is not installed, that step is skipped (see
    :attr:`DemoRun.skipped`) instead of failing the run; any other error propagates.
    """
    demo = example or load_demo()
    specs = {**DEMO_JUDGES, **dict(judges or {})}
    unknown = sorted(set(specs) - set(DEMO_JUDGES))
    if unknown:
        raise ConfigError(
            f"unknown demo step(s) {unknown}; judges are chosen for {list(DEMO_JUDGES)}"
        )
    notify = on_step or (lambda note: None)
    with _judges(specs, base_url) as (built, skipped):
        timings: list[StepTiming] = []

        def step(name: str, judge: Judge | None, notice: str | None = None) -> _Clock:
            return _Clock(name, judge, notice, notify, timings)

        with step("rerank", built["rerank"]):
            reranked = evidex.rerank(
                demo.query,
                demo.passages,
                strategy="pointwise",
                top_k=len(demo.passages),
                judge=built["rerank"],
                store=store,
            )
        order = {p.passage_id: p for p in demo.passages}
        with step("tier", built["tier"]):
            tiered = evidex.tier(
                demo.query, [order[pid] for pid in reranked.ids()], judge=built["tier"], store=store
            )
        with step("select_context", None):
            context = evidex.select_context(tiered, DEMO_POLICY, budget)
        run = DemoRun(
            example=demo,
            judges={job: _judge_name(built.get(job), specs[job]) for job in DEMO_JUDGES},
            rerank=reranked,
            tier=tiered,
            context=context,
            skipped=[
                SkippedStep(step=s, judge=str(specs[s]), reason=r) for s, r in skipped.items()
            ],
        )
        llm = evidex.HarnessSettings(timeout_s=LLM_TIMEOUT_S)
        if "audit" in built:
            judge = built["audit"]
            with step("audit", judge, _time_notice(judge, "audit", len(demo.answer.claims))):
                run.audit = evidex.audit(
                    demo.answer.text,
                    [_with_title(demo, item.passage_id, item.text) for item in context.items],
                    answer_id=demo.answer.answer_id,
                    question=demo.query,
                    claims=[c.claim for c in demo.answer.claims],
                    judge=judge,
                    store=store,
                    settings=llm,
                )
        else:
            notify(
                StepNote(step="audit", status="skipped", index=4, of=5, message=skipped["audit"])
            )
        if "classify" in built:
            judge = built["classify"]
            with step("classify", judge, _time_notice(judge, "classify", 1)):
                run.classify = evidex.classify(
                    demo.classify.input,
                    [demo.passage(pid) for pid in demo.classify.passage_ids],
                    demo.classify.taxonomy,
                    judge=judge,
                    store=store,
                    settings=llm,
                )
        else:
            notify(
                StepNote(
                    step="classify", status="skipped", index=5, of=5, message=skipped["classify"]
                )
            )
        run.timings = timings
        return run


@contextmanager
def _judges(
    specs: Mapping[str, Judge | str], base_url: str | None
) -> Iterator[tuple[dict[str, Judge], dict[str, str]]]:
    """Build each job's judge once per spec (rerank and tier share one encoder), note the LLM
    steps whose extra is missing, and close what was built here when the run ends."""
    if base_url and not any(isinstance(s, str) and s.startswith("openai:") for s in specs.values()):
        raise ConfigError("--base-url applies to openai: judges only, and no step uses one")
    by_spec: dict[str, Judge] = {}
    built: dict[str, Judge] = {}
    skipped: dict[str, str] = {}
    try:
        for job, spec in specs.items():
            if isinstance(spec, Judge):
                built[job] = spec
                continue
            key = spec.strip()
            if key not in by_spec:
                options = dict(JUDGE_OPTIONS.get(key, {}))
                if base_url and key.startswith("openai:"):
                    options["base_url"] = base_url
                try:
                    by_spec[key] = evidex.get_judge(key, **options)
                except MissingExtraError as exc:
                    if job not in LLM_STEPS:
                        raise
                    skipped[job] = str(exc)
                    continue
            built[job] = by_spec[key]
            if not built[job].supports(job):
                raise ConfigError(f"judge {key} cannot do the {job} job")
        yield built, skipped
    finally:
        for judge in by_spec.values():
            run_sync(judge.aclose())


def _judge_name(judge: Judge | None, spec: Judge | str) -> str:
    if judge is not None:
        return judge.judge_id
    return spec.judge_id if isinstance(spec, Judge) else spec


def _with_title(demo: DemoExample, passage_id: str, text: str) -> Passage:
    """A selected passage as the generator saw it: its text from the context, its title kept."""
    return Passage(passage_id=passage_id, text=text, title=demo.passage(passage_id).title)


QWEN_MEASURED_S = {"audit": 366, "classify": 131}
"""Seconds these two steps took with local:qwen when measured on 2 cores shared with other model
processes (load average 6-7, EVIDEX_QWEN_THREADS=1); the largest part is generating the reply."""


def _time_notice(judge: Judge, step: str, items: int) -> str | None:
    """What to expect before an LLM step: the embedded model is slow on a CPU."""
    if not judge.judge_id.startswith("local:qwen"):
        return None
    what = f"{items} claims in one call" if step == "audit" else "one call"
    minutes = QWEN_MEASURED_S[step] / 60
    return (
        f"{what} to {judge.judge_id} on the CPU: {minutes:.0f} min when measured on 2 busy "
        "cores, less on free ones (on a busy machine set EVIDEX_QWEN_THREADS=1); the first use "
        "also joins the model weights into the cache dir"
    )


@dataclass
class _Clock:
    """Times one step and reports its start and end to the listener."""

    step: str
    judge: Judge | None
    notice: str | None
    notify: Listener
    timings: list[StepTiming]
    started: float = 0.0

    def __enter__(self) -> _Clock:
        self.started = time.perf_counter()
        judge_id = self.judge.judge_id if self.judge else None
        self.notify(self._note("start", judge_id=judge_id, message=self.notice))
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            return
        seconds = round(time.perf_counter() - self.started, 2)
        judge_id = self.judge.judge_id if self.judge else None
        self.timings.append(StepTiming(step=self.step, judge_id=judge_id, seconds=seconds))
        self.notify(self._note("done", judge_id=judge_id, seconds=seconds))

    def _note(self, status: Literal["start", "done"], **fields: Any) -> StepNote:
        return StepNote(
            step=self.step, status=status, index=STEPS.index(self.step) + 1, of=5, **fields
        )


# ---------------------------------------------------------------------------- the command


@app.command("demo")
def demo_command(
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            "-j",
            metavar="SPEC",
            show_default=False,
            help="One judge for all four steps (e.g. openai:MODEL with --base-url); the per-step "
            "options below win over it.",
        ),
    ] = None,
    rerank_judge: Annotated[
        str | None,
        typer.Option(
            "--rerank-judge",
            metavar="SPEC",
            show_default=False,
            help="Judge of the rerank step. Default: local:minilm.",
        ),
    ] = None,
    tier_judge: Annotated[
        str | None,
        typer.Option(
            "--tier-judge",
            metavar="SPEC",
            show_default=False,
            help="Judge of the tier step. Default: local:minilm.",
        ),
    ] = None,
    audit_judge: Annotated[
        str | None,
        typer.Option(
            "--audit-judge",
            metavar="SPEC",
            show_default=False,
            help="Judge of the audit step. Default: local:qwen.",
        ),
    ] = None,
    classify_judge: Annotated[
        str | None,
        typer.Option(
            "--classify-judge",
            metavar="SPEC",
            show_default=False,
            help="Judge of the classify step. Default: local:qwen.",
        ),
    ] = None,
    base_url: BaseUrlOpt = None,
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            metavar="TOKENS",
            min=1,
            help=f"Token budget of the {DEMO_POLICY} context selection that the audit reads.",
        ),
    ] = DEMO_BUDGET,
    json_file: Annotated[
        Path,
        typer.Option(
            "--json",
            metavar="FILE",
            dir_okay=False,
            help="Where to write the full result as JSON.",
        ),
    ] = DEMO_JSON,
    db: DbOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Run all four jobs on a bundled example, offline: rerank, tier, context, audit, classify.

    A Kubernetes question with fifteen retrieved passages is reranked and tiered by the
    embedded encoder (local:minilm), the generator's context is picked under a token budget, a
    generated answer with planted mistakes is audited against that context and a support ticket
    is classified, both by the embedded LLM (local:qwen, a few minutes on a CPU). Each step is
    shown next to the example author's labels. Without the llm extra the LLM steps are skipped
    with the command that installs it.
    """
    from evidex.cli._demo_view import StepProgress, show_run

    chosen = {
        job: spec
        for job, spec in {
            "rerank": rerank_judge or judge,
            "tier": tier_judge or judge,
            "audit": audit_judge or judge,
            "classify": classify_judge or judge,
        }.items()
        if spec
    }
    with verbose_logging(verbose), open_db(db) as store, StepProgress(err_console) as progress:
        run = run_demo(
            chosen, store=EchoStore(store), budget=budget, base_url=base_url, on_step=progress.note
        )
    show_run(run, json_file)
    write_json(run.report(), json_file)
