"""The tier job: each passage in one relevance tier, with a justification and a snippet.

``atier()`` / ``tier()`` are the library calls behind ``evidex tier`` and ``POST /tier``;
``atier_many()`` / ``tier_many()`` grade many queries. The job is a :class:`TierSpec` that the
harness runs: preflight (duplicates merged, passages cut to the judge's budget), batches of
``batch_size`` through the tier step, merge by passage id, and at high risk a sample of the
top-tier grades routed to a person.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import Field

from evidex.errors import InputError
from evidex.harness.budget import passage_limit
from evidex.harness.job import JobResult, JobRun, Plan, Routed
from evidex.harness.ports import ReviewRequest
from evidex.harness.routing import sampled
from evidex.jobs._cascade import CascadeReport, cascade_tiers
from evidex.jobs._common import (
    QueryInput,
    RunOptions,
    harness_for,
    job_options,
    prompt_template,
    sync_of,
)
from evidex.judges.cascade import CascadeJudge
from evidex.judging import Judge
from evidex.preflight import (
    Prepared,
    coerce_passages,
    passage_of,
    prepare_passages,
    require_text,
)
from evidex.tasks.base import PromptTemplate
from evidex.tasks.tier import (
    DEFAULT_EXAMPLES,
    TIER_TEMPLATE,
    TierAssignment,
    TierBatch,
    TierExample,
    TierStep,
)
from evidex.types import (
    DEFAULT_TIERS,
    Passage,
    PassageLike,
    RiskLevel,
    TierScheme,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "CascadeReport",
    "TierAssignment",
    "TierCall",
    "TierExample",
    "TierInput",
    "TierOptions",
    "TierResult",
    "TierSpec",
    "atier",
    "atier_many",
    "tier",
    "tier_many",
]

MIN_BATCH, MAX_BATCH, DEFAULT_BATCH = 5, 15, 10


class TierOptions(TypedDict, total=False):
    """The tier job's own options, shared by the library, the CLI and the service.

    ``tiers``: your tier scheme (default: the spec's four tiers); ``examples``: few-shot
    examples (default: built-in ones for the default tiers, none for custom tiers); ``risk``:
    low, medium or high; ``batch_size``: passages per judge call (5-15, default 10);
    ``review_sample_rate``: at high risk, the share of top-tier grades sampled into review.
    """

    tiers: TierScheme | None
    examples: Sequence[TierExample] | None
    risk: RiskLevel | str
    batch_size: int
    review_sample_rate: float


class TierCall(TierOptions, RunOptions, total=False):
    """Every keyword of a tier call."""


TierInput = QueryInput
"""One query with its passages (the batch form's item)."""


class TierResult(JobResult):
    """Every input passage exactly once, in input order, with its tier and provenance."""

    id: str | None = None
    query: str
    classifications: list[TierAssignment]
    tier_summary: dict[str, int]
    scheme: TierScheme
    passages: list[Passage] = Field(repr=False)
    review_item_ids: list[int] = Field(default_factory=list)
    cascade: CascadeReport | None = None
    """With a cascade judge: how its stages split the passages and what that saved."""

    def tier_of(self, passage_id: str) -> str:
        for a in self.classifications:
            if a.passage_id == passage_id:
                return a.tier
        raise KeyError(passage_id)

    def in_tier(self, name: str) -> list[TierAssignment]:
        return [a for a in self.classifications if a.tier == name]

    def passage(self, passage_id: str) -> Passage:
        """The input passage behind ``passage_id``, with its text and metadata as given."""
        return passage_of(self.passages, passage_id)

    def report(self) -> dict[str, Any]:
        """The spec's output schema plus provenance, for JSON output (no passage texts)."""
        return self.model_dump(mode="json", exclude={"passages", "scheme", "id"}) | (
            {"id": self.id} if self.id is not None else {}
        )


@dataclass(frozen=True)
class _Prepared:
    items: list[Passage]
    prepared: Prepared


@dataclass(frozen=True)
class TierSpec:
    """The tier job as the harness runs it."""

    scheme: TierScheme = DEFAULT_TIERS
    examples: tuple[TierExample, ...] = ()
    risk: RiskLevel = RiskLevel.LOW
    batch_size: int = DEFAULT_BATCH
    review_sample_rate: float = 1.0
    template: PromptTemplate = TIER_TEMPLATE
    """The tier step's prompt: the built-in one, or the caller's own wording."""
    job: str = "tier"

    @classmethod
    def of(cls, options: TierOptions | Mapping[str, Any]) -> TierSpec:
        """The spec for these options; bad values are an :class:`InputError` naming them."""
        batch_size = options.get("batch_size", DEFAULT_BATCH)
        if not MIN_BATCH <= batch_size <= MAX_BATCH:
            raise InputError(
                f"batch_size must be between {MIN_BATCH} and {MAX_BATCH}, got {batch_size}"
            )
        rate = options.get("review_sample_rate", 1.0)
        if not 0.0 <= rate <= 1.0:
            raise InputError(f"review_sample_rate must be within [0, 1], got {rate}")
        scheme = options.get("tiers") or DEFAULT_TIERS
        examples = options.get("examples")
        if examples is None:
            examples = DEFAULT_EXAMPLES if scheme == DEFAULT_TIERS else ()
        return cls(
            scheme=scheme,
            examples=tuple(examples),
            risk=RiskLevel(options.get("risk", RiskLevel.LOW)),
            batch_size=batch_size,
            review_sample_rate=rate,
            template=prompt_template("tier", "tier", TIER_TEMPLATE, options.get("prompt")),
        )

    def batch(self, query: str, passages: Sequence[Passage]) -> TierBatch:
        return TierBatch(query, tuple(passages), self.scheme, self.examples, self.risk)

    def plan(self, item: TierInput, judge: Judge) -> Plan[_Prepared]:
        query = require_text(item.query, "the query")
        items = coerce_passages(item.passages)
        probe = TierStep(self.template).request(self.batch(query, ()))
        fixed = "".join(m.content for m in probe.messages)
        prepared = prepare_passages(
            items,
            count_tokens=judge.count_tokens,
            max_passage_tokens=passage_limit(judge, fixed, self.batch_size),
        )
        return Plan(
            query=query,
            data=_Prepared(items, prepared),
            risk=self.risk.value,
            events=tuple(e for e in (judge.query_truncation(query), *prepared.events) if e),
            id=item.id,
        )

    async def execute(self, plan: Plan[_Prepared], run: JobRun) -> TierResult:
        passages = plan.data.prepared.passages
        size = self.batch_size
        step = TierStep(self.template)
        report: CascadeReport | None = None
        by_id: dict[str, TierAssignment] = {}
        if isinstance(run.judge, CascadeJudge):
            by_id, report = await cascade_tiers(
                run.judge, run, plan.query, passages, partial(self.batch, plan.query), step, size
            )
        else:
            batches = [
                self.batch(plan.query, passages[i : i + size])
                for i in range(0, len(passages), size)
            ]
            for outcome in await run.map(step, batches):
                for a in outcome.value.classifications:
                    source = outcome.source_of(a.source)
                    # a copy only where the source changes (cache, fallback): it was a tenth
                    # of the job's own CPU per passage at high concurrency
                    by_id[a.passage_id] = (
                        a if source == a.source else a.model_copy(update={"source": source})
                    )
                for warning in outcome.value.warnings:
                    run.note(warning)
        for dup, original in plan.data.prepared.duplicates.items():
            by_id[dup] = by_id[original].model_copy(
                update={"passage_id": dup, "duplicate_of": original}
            )
        ordered = [by_id[p.passage_id] for p in plan.data.items]
        return TierResult(
            id=plan.id,
            query=plan.query,
            classifications=ordered,
            tier_summary=self.scheme.summary(a.tier for a in ordered),
            scheme=self.scheme,
            passages=plan.data.items,
            events=[*plan.events, *run.events],
            cascade=report,
            **run.provenance(self.template.version),
        )

    def reviews(
        self, plan: Plan[_Prepared], result: TierResult, run: JobRun
    ) -> list[ReviewRequest]:
        """High risk: a person confirms sampled top-tier grades (the spec's review gate)."""
        if self.risk is not RiskLevel.HIGH:
            return []
        top = self.scheme.top
        return [
            run.review_request(
                f"high risk: {top} grade needs human confirmation",
                {
                    "query": plan.query,
                    "assignment": a.model_dump(mode="json"),
                    "tiers": list(self.scheme.names),
                },
                [a.passage_id],
                passages=plan.data.items,
            )
            for a in result.classifications
            if a.tier == top
            and a.source != "fallback"
            and not a.duplicate_of
            and sampled(run.ctx.run_id, a.passage_id, self.review_sample_rate)
        ]

    def finish(
        self, plan: Plan[_Prepared], result: TierResult, run: JobRun, routed: Sequence[Routed]
    ) -> TierResult:
        return result.model_copy(update=run.totals(routed))


async def atier(
    query: str, passages: Iterable[PassageLike], **options: Unpack[TierCall]
) -> TierResult:
    """Assign each passage one relevance tier, in batches of ``batch_size`` (5-15).

    Nothing is lost: a duplicate passage takes its twin's tier (``duplicate_of``), a batch whose
    replies never validate gets the scheme's fallback tier with ``source="fallback"`` and a
    review item, and with ``risk="high"`` every top-tier grade is sampled into review at
    ``review_sample_rate``. Options: :class:`TierOptions` and the run keywords of every job
    (``judge``, ``store``, ``settings``, ``hooks``, ``on_progress``).
    """
    spec = TierSpec.of(job_options(options))
    harness = harness_for("tier", options)
    item = TierInput(query=query, passages=list(passages))
    return await harness.run(spec, item, on_progress=options.get("on_progress"))


async def atier_many(
    items: Iterable[TierInput | Mapping[str, Any]], **options: Unpack[TierCall]
) -> list[TierResult]:
    """Tier many queries (``{query, passages, id?}`` each) with the same options; results in
    input order, progress counted in queries."""
    spec = TierSpec.of(job_options(options))
    harness = harness_for("tier", options)
    inputs = (i if isinstance(i, TierInput) else TierInput.model_validate(i) for i in items)
    return await harness.run_many(spec, inputs, on_progress=options.get("on_progress"))


tier = sync_of(atier)
tier_many = sync_of(atier_many)
