"""The classify job end to end: preflight → one validated judge call → routing to review.

``classify()`` is the library call behind ``evidex classify``; ``classify_many()`` runs a batch
of inputs with bounded concurrency, and :mod:`evidex.jobs.consistency` re-runs one input
to measure how stable its labels are.

Preflight (the spec's harness paragraph): the input and the taxonomy must be non-empty, passage
ids unique, duplicate passages (exact or up to whitespace) are merged and reported, and the
assembled prompt must fit the judge's context window with room for the reply; when it does not,
the lowest-ranked passages are left out and an event says which. The budget is that of the
retry, the largest exchange: the prompt, the first reply, the re-ask with its errors, the strict
reminder with the schema, and the second reply must all fit.

Routing (every risk level): a label below the confidence threshold goes to review. At medium and
high risk a fallback goes to review too (at low risk it is a final, marked ``unclassifiable``);
at high risk also an answer with no label at all, and every label whose only support comes from
passages that the same answer cites as counter-evidence for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import BaseModel, Field, ValidationError

from evidex.errors import InputError
from evidex.harness.ports import ReviewRequest, StorePort
from evidex.harness.runner import Harness, HarnessSettings, Outcome, RunContext
from evidex.jobs._common import resolve_judge, resolve_store, run_sync
from evidex.judging import Judge
from evidex.harness.budget import drop_to_budget
from evidex.preflight import prepare_passages
from evidex.tasks.classify import (
    ClassifyBatch,
    ClassifyExample,
    ClassifyStep,
    ClassifyValue,
    LabelAssignment,
)
from evidex.taxonomy import Taxonomy
from evidex.types import Event, Passage, RiskLevel, Source, Usage

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFAULT_THRESHOLD",
    "ClassifyInput",
    "ClassifyOptions",
    "ClassifyResult",
    "RoutingDecision",
    "aclassify",
    "aclassify_many",
    "classify",
    "classify_many",
]

DEFAULT_THRESHOLD = 0.7
MESSAGE_OVERHEAD_TOKENS = 8
"""Chat-template tokens a judge adds around each message (role markers), added to the count."""
ERRORS_ALLOWANCE_TOKENS = 300
"""Room kept for the validation errors that the retry quotes back to the judge."""


class ClassifyOptions(TypedDict, total=False):
    """Keyword options shared by every classify entry point."""

    judge: Judge | str | None
    store: StorePort | str | None
    constraints: Sequence[str] | None
    examples: Sequence[ClassifyExample] | None
    threshold: float
    risk: RiskLevel | str
    multi_label: bool
    settings: HarnessSettings | None


class RoutingDecision(BaseModel):
    """Why a result (or one of its labels) was put in the review queue."""

    review_item_id: int
    reason: str
    label: str | None = None


class ClassifyInput(BaseModel):
    """One input of a batch: an id for the output, the text, and its retrieved passages."""

    id: str
    input: str
    passages: list[Passage]


class ClassifyResult(BaseModel):
    """The spec's output schema plus where it came from and what was routed to review."""

    id: str | None = None
    input: str
    classifications: list[LabelAssignment]
    unclassifiable: bool
    unclassifiable_reason: str | None = None
    evidence_gaps: list[str] = Field(default_factory=list)
    source: Source
    reason: str | None = Field(default=None, description="why a fallback was used")
    review: list[RoutingDecision] = Field(default_factory=list)
    threshold: float
    risk: RiskLevel
    multi_label: bool
    passage_ids: list[str] = Field(description="the passages the judge saw, in prompt order")
    duplicates: dict[str, str] = Field(
        default_factory=dict, description="removed passage id → the kept id with the same text"
    )
    dropped: list[str] = Field(default_factory=list, description="left out to fit the budget")
    events: list[Event] = Field(default_factory=list)
    judge_id: str
    prompt_version: str
    run_id: str
    usage: Usage = Field(default_factory=Usage)
    judge_calls: int = 0

    @property
    def labels(self) -> list[str]:
        return [a.label for a in self.classifications]

    @property
    def review_item_ids(self) -> list[int]:
        return [r.review_item_id for r in self.review]

    def report(self) -> dict[str, Any]:
        """JSON-ready output (``risk`` as its value)."""
        return self.model_dump(mode="json")


# ---------------------------------------------------------------------------- entry points


def classify(
    input: str,
    passages: Iterable[Passage | Mapping[str, Any]],
    taxonomy: Taxonomy | Any,
    **options: Unpack[ClassifyOptions],
) -> ClassifyResult:
    """Classify ``input`` against ``taxonomy`` from ``passages``. See :func:`aclassify`."""
    return run_sync(aclassify(input, passages, taxonomy, **options))


async def aclassify(
    input: str,
    passages: Iterable[Passage | Mapping[str, Any]],
    taxonomy: Taxonomy | Any,
    **options: Unpack[ClassifyOptions],
) -> ClassifyResult:
    """Assign labels from ``taxonomy`` to ``input``, each backed by verbatim passage quotes.

    ``taxonomy`` is a :class:`Taxonomy` or anything :meth:`Taxonomy.parse` accepts. Options:
    ``threshold`` (default 0.7) routes lower-confidence labels to review; ``risk`` (low,
    medium, high) sets how much else is routed; ``multi_label`` allows several labels;
    ``constraints`` are extra rules for the prompt; ``examples`` few-shot demonstrations.
    A reply that is still invalid after the one retry becomes ``unclassifiable`` with
    ``source="fallback"`` (and a review item at medium and high risk). Bad input raises
    :class:`~evidex.errors.InputError` before any judge is called.
    """
    runner = ClassifyRunner.build(taxonomy, options)
    plan = runner.plan(input, passages, where=None)
    return await runner.run(plan)


def classify_many(
    items: Iterable[ClassifyInput | Mapping[str, Any]],
    taxonomy: Taxonomy | Any,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    **options: Unpack[ClassifyOptions],
) -> list[ClassifyResult]:
    """Classify many inputs against one taxonomy. See :func:`aclassify_many`."""
    return run_sync(aclassify_many(items, taxonomy, on_progress=on_progress, **options))


async def aclassify_many(
    items: Iterable[ClassifyInput | Mapping[str, Any]],
    taxonomy: Taxonomy | Any,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    **options: Unpack[ClassifyOptions],
) -> list[ClassifyResult]:
    """Classify each item (``{id, input, passages}``); results come back in input order.

    Every item is preflighted before the first judge call, so bad input anywhere in the batch
    stops it early with an error naming the item. Items run concurrently up to the harness's
    ``max_concurrency``.
    """
    runner = ClassifyRunner.build(taxonomy, options)
    plans = []
    for index, raw in enumerate(items):
        item = _coerce_item(raw, index)
        plans.append(runner.plan(item.input, item.passages, where=f"item {item.id!r}", id=item.id))
    if not plans:
        raise InputError("no inputs to classify")
    limit = runner.harness.settings.max_concurrency
    # An in-process model answers one call at a time; more in flight would only queue under
    # the harness's timeouts.
    limit = min(limit, getattr(runner.harness.judge, "max_concurrency", limit))
    semaphore = asyncio.Semaphore(max(1, limit))
    done = 0

    async def one(plan: Plan) -> ClassifyResult:
        nonlocal done
        async with semaphore:
            result = await runner.run(plan)
        done += 1
        if on_progress is not None:
            on_progress(done, len(plans))
        return result

    return list(await asyncio.gather(*(one(plan) for plan in plans)))


# ---------------------------------------------------------------------------- internals


@dataclass(frozen=True)
class Plan:
    """One preflighted input: the batch the judge will see and what preflight did."""

    batch: ClassifyBatch
    events: tuple[Event, ...]
    duplicates: Mapping[str, str]
    dropped: tuple[str, ...]
    id: str | None = None

    def with_passages(self, passages: Sequence[Passage]) -> Plan:
        """The same plan with the passages in another order (for the consistency check)."""
        return dataclasses.replace(
            self, batch=dataclasses.replace(self.batch, passages=tuple(passages))
        )


@dataclass
class ClassifyRunner:
    """The judge, harness and settings of one call of an entry point."""

    harness: Harness
    template: ClassifyBatch
    """A batch without input or passages: the options every plan shares."""
    step: ClassifyStep = dataclasses.field(default_factory=ClassifyStep)

    @classmethod
    def build(
        cls, taxonomy: Taxonomy | Any, options: ClassifyOptions, *, use_cache: bool = True
    ) -> ClassifyRunner:
        parsed = Taxonomy.parse(taxonomy)
        threshold = options.get("threshold", DEFAULT_THRESHOLD)
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not 0.0 <= threshold <= 1.0
        ):
            raise InputError(f"threshold must be a number from 0 to 1, got {threshold!r}")
        try:
            risk = RiskLevel(options.get("risk", RiskLevel.LOW))
        except ValueError as exc:
            raise InputError(f"risk must be one of low, medium, high: {exc}") from exc
        constraints = tuple(c.strip() for c in options.get("constraints") or () if c.strip())
        examples = tuple(options.get("examples") or ())
        for i, example in enumerate(examples, 1):
            unknown = {a.label for a in example.output.classifications} - set(parsed.names)
            if unknown:
                raise InputError(
                    f"example {i} uses labels that are not in the taxonomy: {sorted(unknown)}"
                )
        judge = resolve_judge(options.get("judge"), "classify")
        settings = options.get("settings") or HarnessSettings.from_config()
        if not use_cache:
            settings = dataclasses.replace(settings, use_cache=False)
        harness = Harness(judge, resolve_store(options.get("store")), settings=settings)
        template = ClassifyBatch(
            input="",
            passages=(),
            taxonomy=parsed,
            constraints=constraints,
            examples=examples,
            threshold=float(threshold),
            risk=risk,
            multi_label=bool(options.get("multi_label", False)),
        )
        return cls(harness=harness, template=template)

    # ------------------------------------------------------------------ preflight

    def plan(
        self,
        input: str,
        passages: Iterable[Passage | Mapping[str, Any]],
        *,
        where: str | None,
        id: str | None = None,
    ) -> Plan:
        """Preflight one input; raises ``InputError`` (naming ``where``) on bad input."""
        if not isinstance(input, str) or not input.strip():
            raise InputError("the input text to classify is empty", where=where)
        items = _coerce_passages(passages, where)
        judge = self.harness.judge
        base = dataclasses.replace(self.template, input=input)
        reserve = 2 * self.step.request(base).max_tokens + ERRORS_ALLOWANCE_TOKENS
        budget = judge.context_window - reserve
        fixed = self._prompt_tokens(base, ())
        if fixed >= budget:
            raise InputError(
                f"the input, taxonomy, constraints and examples alone need {fixed} prompt "
                f"tokens, over the {budget} that {judge.judge_id} leaves after reserving "
                f"{reserve} for the replies of the retry; shorten them or use a judge with a "
                "larger context window",
                where=where,
            )
        try:
            prepared = prepare_passages(
                items, count_tokens=judge.count_tokens, max_passage_tokens=budget - fixed
            )
            kept, dropped_events = drop_to_budget(
                prepared.passages,
                prompt_tokens=lambda ps: self._prompt_tokens(base, ps),
                budget=budget,
            )
        except InputError as exc:
            raise InputError(str(exc), where=where) from exc
        events = (*prepared.events, *dropped_events)
        dropped = tuple(pid for e in dropped_events for pid in e.passage_ids)
        batch = dataclasses.replace(base, passages=tuple(kept))
        return Plan(batch, events, prepared.duplicates, dropped, id)

    def _prompt_tokens(self, base: ClassifyBatch, passages: Sequence[Passage]) -> int:
        """Prompt tokens of the retry, the largest exchange: the prompt, the re-ask note and
        the strict reminder with the schema (the replies are reserved separately)."""
        batch = dataclasses.replace(base, passages=tuple(passages))
        request = self.step.request(batch)
        template = self.step.template
        texts = [m.content for m in request.messages]
        texts += [
            template.reask.replace("[ERRORS]", ""),
            template.strict.replace("[SCHEMA]", json.dumps(request.schema)),
        ]
        count = self.harness.judge.count_tokens("\n".join(texts))
        return count + MESSAGE_OVERHEAD_TOKENS * (len(texts) + 1)

    # ------------------------------------------------------------------ run and route

    async def run(self, plan: Plan, *, route: bool = True) -> ClassifyResult:
        """Judge one planned input; with ``route`` put what the rules say into review."""
        batch = plan.batch
        ctx = RunContext(
            job="classify",
            query=batch.input,
            risk=batch.risk.value,
            review_fallback=route and batch.risk is not RiskLevel.LOW,
        )
        for event in plan.events:
            self.harness.note(
                ctx, event.kind, event.detail, passage_ids=event.passage_ids, **event.data
            )
        outcome = await self.harness.call(self.step, batch, ctx)
        review = _route(self.harness, ctx, batch, outcome) if route else []
        value = outcome.value
        return ClassifyResult(
            id=plan.id,
            input=batch.input,
            classifications=value.classifications,
            unclassifiable=value.unclassifiable,
            unclassifiable_reason=value.unclassifiable_reason,
            evidence_gaps=value.evidence_gaps,
            source=outcome.source,
            reason=outcome.reason,
            review=review,
            threshold=batch.threshold,
            risk=batch.risk,
            multi_label=batch.multi_label,
            passage_ids=[p.passage_id for p in batch.passages],
            duplicates=dict(plan.duplicates),
            dropped=list(plan.dropped),
            events=list(plan.events),
            judge_id=self.harness.judge.judge_id,
            prompt_version=self.step.template.version,
            run_id=ctx.run_id,
            usage=outcome.usage,
            judge_calls=outcome.judge_calls,
        )


def _route(
    harness: Harness, ctx: RunContext, batch: ClassifyBatch, outcome: Outcome[ClassifyValue]
) -> list[RoutingDecision]:
    """Apply the routing rules; each review item stores its reason in words."""
    decisions: list[RoutingDecision] = []
    if outcome.review_item_id is not None:
        decisions.append(
            RoutingDecision(
                review_item_id=outcome.review_item_id,
                reason=f"fallback at {batch.risk.value} risk: {outcome.reason}",
            )
        )
    if outcome.source == "fallback":
        return decisions
    value = outcome.value
    wanted: list[tuple[str, LabelAssignment | None]] = []
    for a in value.classifications:
        if a.confidence < batch.threshold:
            wanted.append(
                (
                    f"confidence {a.confidence:g} for label {a.label} is below the threshold "
                    f"{batch.threshold:g}",
                    a,
                )
            )
    if batch.risk is RiskLevel.HIGH:
        if value.unclassifiable:
            wanted.append(
                (
                    "high risk: the judge found no label it could support "
                    f"({value.unclassifiable_reason})",
                    None,
                )
            )
        for a in value.classifications:
            if contested(a):
                wanted.append(
                    (
                        f"high risk: every supporting quote for label {a.label} comes from a "
                        "passage the answer also cites as counter-evidence for it",
                        a,
                    )
                )
    for reason, assignment in wanted:
        item_id = harness.review(
            ctx,
            ReviewRequest(
                job="classify",
                reason=reason,
                run_id=ctx.run_id,
                risk=ctx.risk,
                passage_ids=[p.passage_id for p in batch.passages],
                payload={
                    "input": batch.input,
                    "label": assignment.label if assignment else None,
                    "assignment": assignment.model_dump(mode="json") if assignment else None,
                    "result": value.model_dump(mode="json"),
                },
            ),
        )
        decisions.append(
            RoutingDecision(
                review_item_id=item_id,
                reason=reason,
                label=assignment.label if assignment else None,
            )
        )
    return decisions


def contested(assignment: LabelAssignment) -> bool:
    """True when each supporting quote's passage is also cited against the same label: the
    label's only support is itself counter-evidenced."""
    against = {e.passage_id for e in assignment.counter_evidence}
    return bool(against) and all(e.passage_id in against for e in assignment.supporting_evidence)


def _coerce_passages(
    passages: Iterable[Passage | Mapping[str, Any]], where: str | None
) -> list[Passage]:
    items: list[Passage] = []
    for index, p in enumerate(passages):
        if isinstance(p, Passage):
            items.append(p)
            continue
        try:
            items.append(Passage.model_validate(p))
        except ValidationError as exc:
            raise InputError(f"passage {index}: {_problems(exc)}", where=where) from exc
    return items


def _coerce_item(raw: ClassifyInput | Mapping[str, Any], index: int) -> ClassifyInput:
    if isinstance(raw, ClassifyInput):
        return raw
    try:
        return ClassifyInput.model_validate(raw)
    except ValidationError as exc:
        raise InputError(f"item {index}: {_problems(exc)}") from exc


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()
    )
