"""The rerank job: 20-50 candidates into a strict top-k with per-passage justifications.

``arerank()`` / ``rerank()`` are the library calls behind ``evidex rerank`` and
``POST /rerank``; ``arerank_many()`` / ``rerank_many()`` rerank many queries. The job is a
:class:`RerankSpec` the harness runs: preflight → cut to ``top_n`` → a strategy (its stages,
:mod:`evidex.jobs._rerank_run`) → merge → metrics. Every strategy returns the same
:class:`RerankResult`: a complete ranking (ranks 1..n, each candidate once), where the first
``top_n`` candidates in retrieval order were reranked and the rest keep their retrieval order
below them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from pydantic import BaseModel, Field, model_validator

from evidex.harness.budget import passage_limit
from evidex.harness.job import JobResult, JobRun, MergedIsResult, Plan
from evidex.harness.ports import ReviewRequest
from evidex.jobs._common import QueryInput, RunOptions, prompt_template, sync_of
from evidex.jobs._definition import Evaluation, Flag, JobDefinition, RiskOptions, SpecContext
from evidex.jobs._rank_algos import kendall_tau_distance
from evidex.jobs._rerank_documents import RERANK_DOCUMENTS
from evidex.jobs._rerank_grounding import Grounding, check_grounding
from evidex.jobs._rerank_review import REVIEW as RERANK_REVIEW
from evidex.jobs._rerank_review import GroundingCheck, RerankReview
from evidex.jobs._rerank_run import StrategyRun, assemble, flag, template_of
from evidex.jobs._suspects import Suspects
from evidex.judges.scoring import Scorer, ScoringJudge
from evidex.judging import Judge
from evidex.preflight import (
    Prepared,
    coerce_passages,
    fit_passages,
    passage_of,
    prepare_passages,
    require_text,
)
from evidex.tasks.base import PromptTemplate
from evidex.tasks.rerank import RankedPassage
from evidex.types import Event, Passage, PassageLike, RiskLevel, Source

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFINITION",
    "Grounding",
    "RankedPassage",
    "RerankCall",
    "RerankInput",
    "RerankMetrics",
    "RerankOptions",
    "RerankOptionsModel",
    "RerankResult",
    "RerankSpec",
    "arerank",
    "arerank_many",
    "rerank",
    "rerank_many",
]

DEFAULT_TOP_K, DEFAULT_TOP_N = 10, 30
DEFAULT_WINDOW, DEFAULT_STEP = 20, 10
CHAT_SCORE_BATCH = 10
"""Passages per pointwise call for chat judges; scoring judges get every candidate at once."""


class RerankOptions(TypedDict, total=False):
    """The rerank job's options as keywords of the library call (for type checkers); each is
    declared, with its default, bounds and help, in :class:`RerankOptionsModel`, and a test
    keeps the two in step."""

    strategy: str | None
    top_k: int
    top_n: int
    window: int
    step: int
    check_grounding: bool
    risk: RiskLevel | str


Strategy = Literal["allpairs", "pairwise", "listwise", "pointwise"]


class RerankOptionsModel(RiskOptions):
    """The rerank job's own options: the library call, ``evidex rerank``, ``evidex bulk
    rerank`` and ``POST /rerank`` all read them from here."""

    strategy: Annotated[
        Strategy | None,
        Flag("--strategy", "-s"),
        Field(
            description="allpairs: one call ranks all; pairwise: two-passage comparisons, asked "
            "in both orders; listwise: sliding windows; pointwise: a score per passage. "
            "Default: pointwise for scoring judges (local:minilm), allpairs for the others."
        ),
    ] = None
    top_k: Annotated[
        int,
        Flag("--top-k", "-k", metavar="K"),
        Field(ge=1, description="How many passages you need: the strict top."),
    ] = DEFAULT_TOP_K
    top_n: Annotated[
        int,
        Flag(metavar="N"),
        Field(
            ge=1,
            description="Rerank only the first N candidates; the rest keep their retrieval order.",
        ),
    ] = DEFAULT_TOP_N
    window: Annotated[
        int, Flag(metavar="W"), Field(ge=2, description="Listwise: passages per call.")
    ] = DEFAULT_WINDOW
    step: Annotated[
        int,
        Flag(metavar="S"),
        Field(ge=1, description="Listwise: how far each window moves up (less than window)."),
    ] = DEFAULT_STEP
    check_grounding: Annotated[
        bool,
        Field(
            description="After ranking, check that the top-k together answer the query (the "
            "tier prompt on the top-k); a query they do not answer gets a review item."
        ),
    ] = False

    @model_validator(mode="after")
    def _window_moves(self) -> RerankOptionsModel:
        if self.step >= self.window:
            raise ValueError(f"step must be less than window, got {self.step} and {self.window}")
        return self


class RerankCall(RerankOptions, RunOptions, total=False):
    """Every keyword of a rerank call."""


RerankInput = QueryInput
"""One query with its passages (the batch form's item)."""


class RerankMetrics(BaseModel):
    """What the spec asks to log for every rerank call (also written as an audit-log note)."""

    query: str
    candidate_count: int
    reranked_count: int
    output_ranking: list[str]
    scores: dict[str, float | None]
    latency_ms: float
    judge_calls: int
    prompt_tokens: int
    completion_tokens: int
    inversion_rate: float = Field(
        description="normalised Kendall tau distance between the retrieval order and the "
        "output order of the reranked candidates (0 = unchanged, 1 = reversed)"
    )
    justification_flags: dict[str, str] = Field(
        default_factory=dict, description="heuristic: passage id → 'empty' or 'generic'"
    )
    truncation_events: int = 0
    comparisons: int | None = Field(default=None, description="pairwise: distinct pairs compared")
    ties: int | None = Field(default=None, description="pairwise: inconsistent or failed pairs")
    grounding_answered: bool | None = Field(
        default=None, description="grounding check: whether the top-k answer the query"
    )
    grounding_supporting: int | None = Field(
        default=None, description="grounding check: directly-supporting passages in the top-k"
    )
    grounding_source: Source | None = Field(
        default=None, description="grounding check: judge, cache or fallback"
    )


class RerankResult(JobResult):
    """One ranking for every strategy: each candidate once, ranks 1..n, with provenance.

    ``source`` is ``fallback`` when any part of the ranking fell back to retrieval order (the
    review queue then holds an item, see ``review_item_ids``), ``cache`` when every judgment
    came from the cache, else ``judge``. A passage's own ``source`` is None when no judge
    placed it (it was below the ``top_n`` cut, or outside the pairwise top-k).
    """

    id: str | None = None
    query: str
    strategy: str
    top_k: int
    ranked_passages: list[RankedPassage]
    source: Source
    reason: str | None = None
    metrics: RerankMetrics
    grounding: Grounding | None = Field(
        default=None, description="the grounding check's verdict (with check_grounding)"
    )
    review_item_ids: list[int] = Field(default_factory=list)
    passages: list[Passage] = Field(default_factory=list, repr=False, exclude=True)
    """The candidates as given (text, title, url, metadata), in input order; not serialised."""

    def top(self, k: int | None = None) -> list[RankedPassage]:
        """The first ``k`` (default ``top_k``) passages of the ranking."""
        return self.ranked_passages[: self.top_k if k is None else k]

    def passage(self, passage_id: str) -> Passage:
        """The candidate behind ``passage_id``, with its text and metadata as given."""
        return passage_of(self.passages, passage_id)

    def ids(self) -> list[str]:
        return [r.passage_id for r in self.ranked_passages]

    def report(self, *, limit: int | None = None) -> dict[str, Any]:
        """The spec's output plus provenance, for JSON output; ``limit`` cuts the ranking."""
        data = self.model_dump(mode="json", exclude=set() if self.id else {"id"})
        if limit is not None:
            data["ranked_passages"] = data["ranked_passages"][:limit]
        return data


@dataclass(frozen=True)
class _Candidates:
    started: float
    items: list[Passage]
    deduped: Prepared
    head: list[Passage]
    tail: list[Passage]


@dataclass(frozen=True)
class RerankSpec(MergedIsResult):
    """The rerank job as the harness runs it, for one strategy."""

    strategy: str
    top_k: int = DEFAULT_TOP_K
    top_n: int = DEFAULT_TOP_N
    window: int = DEFAULT_WINDOW
    step: int = DEFAULT_STEP
    scoring: bool = False
    """Pointwise with a scoring judge: every candidate in one call of its ``score``."""
    check_grounding: bool = False
    template: PromptTemplate | None = None
    """The strategy step's prompt; None: the built-in one (:func:`template_of`)."""
    risk: RiskLevel = RiskLevel.LOW
    job: str = "rerank"

    @classmethod
    def of(cls, options: RerankOptionsModel, context: SpecContext) -> RerankSpec:
        """The spec for these (validated) options on ``context.judge``: the default strategy
        is the judge's natural one."""
        scoring_judge = isinstance(context.judge, Scorer)
        strategy = options.strategy or ("pointwise" if scoring_judge else "allpairs")
        builtin = template_of(strategy)
        step_name = {"pairwise": "rerank.pair", "pointwise": "rerank.score"}.get(strategy, "rerank")
        return cls(
            strategy,
            options.top_k,
            options.top_n,
            options.window,
            options.step,
            scoring=strategy == "pointwise" and scoring_judge,
            check_grounding=options.check_grounding,
            template=prompt_template("rerank", step_name, builtin, context.prompt),
            risk=options.risk,
        )

    @property
    def prompt(self) -> PromptTemplate:
        """The template the strategy's judge calls use."""
        return self.template or template_of(self.strategy)

    def runner_judge(self, judge: Judge) -> Judge:
        """The judge the harness calls: a scoring judge answers the score step itself."""
        return ScoringJudge(judge) if self.scoring else judge

    def per_call(self, head: int) -> int:
        return {"allpairs": head, "listwise": min(self.window, head), "pairwise": 2}.get(
            self.strategy, head if self.scoring else CHAT_SCORE_BATCH
        )

    def plan(self, item: RerankInput, judge: Judge) -> Plan[_Candidates]:
        started = time.perf_counter()
        require_text(item.query, "the query")
        items = coerce_passages(item.passages, noun="candidate")
        deduped = prepare_passages(
            _retrieval_order(items), count_tokens=judge.count_tokens, query=item.query
        )
        head, tail = deduped.passages[: self.top_n], deduped.passages[self.top_n :]
        events = [e for e in (judge.query_truncation(item.query), *deduped.events) if e]
        if tail:
            events.append(_cut_event(len(deduped.passages), self.top_n, tail))
        template = self.prompt
        fitted = fit_passages(
            head,
            count_tokens=judge.count_tokens,
            max_passage_tokens=passage_limit(
                judge, template.system + template.user, self.per_call(len(head))
            ),
        )
        events += fitted.events
        return Plan(
            query=item.query,
            data=_Candidates(started, items, deduped, fitted.passages, tail),
            risk=self.risk.value,
            events=tuple(events),
            id=item.id,
        )

    async def execute(self, plan: Plan[_Candidates], run: JobRun) -> RerankResult:
        data = plan.data
        stages = StrategyRun(run, plan.query, data.head, template=self.template)
        if self.strategy == "pairwise":
            await stages.pairwise(self.top_k)
        elif self.strategy == "listwise":
            await stages.listwise(self.window, self.step)
        elif self.strategy == "pointwise":
            await stages.pointwise(self.per_call(len(data.head)))
        else:
            await stages.allpairs()
        for event in stages.events:
            run.log(event)
        # and what the run noted as it went (a batch split, batches cut smaller): logged already
        events = [*plan.events, *stages.events, *run.events]

        ranked = assemble(
            stages.placed, data.tail, data.deduped.duplicates, {p.passage_id: p for p in data.items}
        )
        texts = {p.passage_id: p.text for p in data.head}
        flags = {} if self.scoring else flag(ranked, texts, events, run)
        source, reason = stages.verdict()
        head_ids = [p.passage_id for p in data.head]
        grounding = await self._grounding(plan, ranked, run) if self.check_grounding else None
        usage = run.usage
        metrics = RerankMetrics(
            query=plan.query,
            candidate_count=len(data.items),
            reranked_count=len(head_ids),
            output_ranking=[r.passage_id for r in ranked],
            scores={r.passage_id: r.relevance_score for r in ranked},
            latency_ms=(time.perf_counter() - data.started) * 1000,
            judge_calls=run.calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            inversion_rate=kendall_tau_distance(head_ids, [r.passage_id for r in ranked]),
            justification_flags=flags,
            truncation_events=sum(1 for e in events if e.kind == "truncated"),
            comparisons=stages.comparisons if self.strategy == "pairwise" else None,
            ties=stages.ties if self.strategy == "pairwise" else None,
            grounding_answered=grounding.answered if grounding else None,
            grounding_supporting=len(grounding.supporting) if grounding else None,
            grounding_source=grounding.source if grounding else None,
        )
        # the row carries the query's hash (as every audit-log row does), not its text
        logged = metrics.model_dump(exclude={"query"})
        run.harness.note(run.ctx, "rerank_metrics", f"rerank metrics ({self.strategy})", **logged)
        return RerankResult(
            id=plan.id,
            query=plan.query,
            strategy=self.strategy,
            top_k=self.top_k,
            ranked_passages=ranked,
            source=source,
            reason=reason,
            events=events,
            metrics=metrics,
            passages=data.items,
            grounding=grounding,
            **run.provenance(self.prompt.version),
        )

    async def _grounding(
        self, plan: Plan[_Candidates], ranked: Sequence[RankedPassage], run: JobRun
    ) -> Grounding:
        """The check on the top-k as ranked (each text once: the fitted text the ranking saw
        where there is one), excluded passages and duplicates left out."""
        texts = {p.passage_id: p for p in plan.data.items} | {
            p.passage_id: p for p in plan.data.head
        }
        top = [
            texts[r.passage_id]
            for r in ranked[: self.top_k]
            if not r.excluded and not r.duplicate_of
        ]
        return await check_grounding(run, plan.query, top)

    def reviews(
        self, plan: Plan[_Candidates], result: RerankResult, run: JobRun
    ) -> list[ReviewRequest]:
        """A ranking that fell back has its review item from the harness; with the grounding
        check, a query whose top-k does not answer it (or was not shown to) gets one too; at
        medium and high risk, so does a top-k holding flagged passages (never ranked on the
        flagged text, which the judge did not read, but written to be ranked)."""
        requests = []
        top = [r.passage_id for r in result.top() if not r.excluded and not r.duplicate_of]
        flagged = Suspects.of(plan.events, self.risk).to_route(top)
        if flagged:
            requests.append(
                run.review_request(
                    Suspects.reason(f"the top {self.top_k}: {', '.join(flagged)}"),
                    RerankReview(query=plan.query, strategy=self.strategy, flag="suspected"),
                    flagged,
                    passages=plan.data.items,
                )
            )
        g = result.grounding
        if g is not None and not g.answered:
            requests.append(
                run.review_request(
                    f"grounding: the top {len(g.checked)} passages do not answer the query"
                    + (" (the check fell back)" if g.source == "fallback" else ""),
                    RerankReview(
                        query=plan.query, grounding=GroundingCheck.model_validate(g.model_dump())
                    ),
                    g.checked,
                    passages=plan.data.items,
                )
            )
        return requests


# ---------------------------------------------------------------------------- entry points


async def arerank(
    query: str, passages: Iterable[PassageLike], **options: Unpack[RerankCall]
) -> RerankResult:
    """Rerank the first ``top_n`` candidates (in retrieval order) and keep the rest below.

    Retrieval order is the candidates' ``rank`` when every candidate has one, else the order
    given. Strategies: ``allpairs`` (one call ranks all, the spec's prompt), ``listwise``
    (windows of ``window`` passages slid up by ``step``), ``pairwise`` (two-passage
    comparisons in both orders, sorted by a tournament that finds the ``top_k`` with far fewer
    comparisons than all pairs) and ``pointwise`` (one score per passage; the natural strategy
    of scoring judges such as ``local:minilm``, and the default for them; other judges default
    to ``allpairs``). A ranking that never validates falls back to retrieval order with
    ``source="fallback"`` and a review item. Options: :class:`RerankOptions` and the run
    keywords of every job (``judge``, ``store``, ``settings``, ``hooks``, ``on_progress``).
    """
    return await DEFINITION.arun(RerankInput(query=query, passages=list(passages)), **options)


async def arerank_many(
    items: Iterable[RerankInput | Mapping[str, Any]], **options: Unpack[RerankCall]
) -> list[RerankResult]:
    """Rerank many queries (``{query, passages, id?}`` each) with the same options; results
    in input order, progress counted in queries."""
    return await DEFINITION.arun_many(items, **options)


def _respond(result: RerankResult, extras: object = None) -> dict[str, Any]:
    # the strict top-k, as a command prints it; the library's result keeps the full order
    return result.report(limit=result.top_k)


DEFINITION: JobDefinition[RerankInput, RerankOptionsModel, RerankResult] = JobDefinition(
    name="rerank",
    options=RerankOptionsModel,
    input=RerankInput,
    result=RerankResult,
    spec=RerankSpec.of,
    response=_respond,
    review=RERANK_REVIEW,
    evaluation=Evaluation(
        measures=("nDCG@10", "P@10", "P(rel=2)@10", "RR", "RR(rel=2)"),
        golden="evidex.evaluate.golden:RerankGolden",
        evaluator="evidex.evaluate.rerank:RerankEvaluator",
    ),
    documents=RERANK_DOCUMENTS,
)

rerank = sync_of(arerank)
rerank_many = sync_of(arerank_many)


# ---------------------------------------------------------------------------- helpers


def _retrieval_order(items: Sequence[Passage]) -> list[Passage]:
    """By ``rank`` when every candidate has one (stable), else as given."""
    if items and all(p.rank is not None for p in items):
        return sorted(items, key=lambda p: p.rank or 0)
    return list(items)


def _cut_event(count: int, top_n: int, tail: Sequence[Passage]) -> Event:
    return Event(
        kind="truncated",
        detail=f"{count} candidates exceed top_n={top_n}; the first {top_n} in retrieval order "
        f"were reranked and the other {len(tail)} keep their retrieval order below them",
        passage_ids=[p.passage_id for p in tail],
        data={"cause": "top_n", "top_n": top_n, "candidates": count},
    )
