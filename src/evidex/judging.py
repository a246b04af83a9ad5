"""The judge interface: the one small contract every backend implements.

A judge answers a :class:`JudgeRequest` with raw text. Chat judges read ``messages`` and
``schema``; native judges (an encoder that scores pairs) read the typed ``payload`` (one
:class:`Payload` class per kind of exchange, so a judge dispatches on its type) and answer in
the same JSON schema, so validation, re-asks, fallback and logging are the same for all.
Backends live in ``evidex.judges``; this module imports no SDK.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from evidex._text import estimate_tokens
from evidex.frontier import FrontierRule
from evidex.limits import JudgeGate
from evidex.taxonomy import LabelDefinition
from evidex.types import Event, Passage, TierDefinition, Usage

__all__ = [
    "AuditPayload",
    "ClaimText",
    "ClaimsPayload",
    "ClassifyPayload",
    "ExtractPayload",
    "Judge",
    "JudgeReply",
    "JudgeRequest",
    "Message",
    "PairPayload",
    "PassageText",
    "PassagesPayload",
    "Payload",
    "RankPayload",
    "ScorePayload",
    "Split",
    "Staging",
    "TierPayload",
]

_GATE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class PassageText:
    """A passage as a judge sees it: its id and text, nothing else."""

    passage_id: str
    text: str

    @classmethod
    def of(cls, passages: Sequence[Passage]) -> tuple[PassageText, ...]:
        return tuple(cls(p.passage_id, p.text) for p in passages)


@dataclass(frozen=True)
class Payload:
    """The typed input of one exchange, for judges that do not read the prose prompt."""


@dataclass(frozen=True)
class PassagesPayload(Payload):
    """A query and passages to judge against it."""

    query: str
    passages: tuple[PassageText, ...]


@dataclass(frozen=True)
class TierPayload(PassagesPayload):
    """Tier each passage; ``tiers`` most relevant first."""

    tiers: tuple[TierDefinition, ...] = ()
    risk: str = "low"


@dataclass(frozen=True)
class RankPayload(PassagesPayload):
    """Rank the passages (allpairs, or one listwise window)."""


@dataclass(frozen=True)
class ScorePayload(PassagesPayload):
    """Score each passage on its own (pointwise)."""


@dataclass(frozen=True)
class PairPayload(PassagesPayload):
    """Say which of two passages (A, then B) answers better."""


@dataclass(frozen=True)
class ClassifyPayload(Payload):
    """Label ``input`` from the taxonomy using only the passages."""

    input: str
    passages: tuple[PassageText, ...]
    labels: tuple[LabelDefinition, ...]
    multi_label: bool = False
    threshold: float = 0.7
    risk: str = "low"


@dataclass(frozen=True)
class ExtractPayload(Payload):
    """Split an answer (segment) into claims."""

    answer: str
    question: str | None = None


@dataclass(frozen=True)
class AuditPayload(Payload):
    """Split an answer segment into claims and grade each against the passages (one pass)."""

    answer: str
    passages: tuple[PassageText, ...]
    answer_id: str | None = None
    question: str | None = None
    risk: str = "low"


@dataclass(frozen=True)
class ClaimText:
    claim_id: str
    claim_text: str


@dataclass(frozen=True)
class ClaimsPayload(Payload):
    """Grade given claims against the passages."""

    claims: tuple[ClaimText, ...]
    passages: tuple[PassageText, ...]
    question: str | None = None
    risk: str = "low"


@dataclass(frozen=True)
class JudgeRequest:
    """Everything a judge may need for one exchange. Never mutated: re-asks build a new one."""

    job: str
    messages: tuple[Message, ...]
    schema: Mapping[str, Any]
    payload: Payload
    temperature: float = 0.2
    max_tokens: int = 2048
    attempt: int = 1
    step: str = ""
    """Which kind of exchange inside a job (``tier``, ``audit.extract`` ...), for logs and
    names; judges dispatch on the type of :attr:`payload`."""


@dataclass(frozen=True)
class JudgeReply:
    text: str
    usage: Usage = field(default_factory=Usage)
    model_version: str = ""
    endpoint: str = ""
    """Which server answered, for a judge over several (no credentials in it); in the audit
    row's ``detail``."""
    notes: tuple[str, ...] = ()
    """What the judge learned while answering (a server refused a structured-output mode and
    the call went out in another), each written to the audit log as a note."""
    truncated: bool = False
    """The reply stopped at ``max_tokens`` (``finish_reason: length``): the harness splits a
    batch whose reply was cut off instead of asking for the same long reply again."""


class Judge(abc.ABC):
    """A backend. Subclasses set ``jobs`` and implement :meth:`complete`.

    ``judge_id`` is the spec string (``openai:gpt-4o-mini``); together with :meth:`fingerprint`
    it enters the cache key, so changing a model or an option never serves stale judgments.
    Secrets (API keys) must never appear in either.
    """

    jobs: ClassVar[frozenset[str]] = frozenset()
    context_window: int = 8192
    is_heuristic: bool = False
    """True for judges whose verdicts come from scores and thresholds, not from reading."""
    default_timeout_s: float | None = 120.0
    """How long one call may take when the caller sets no timeout (``HarnessSettings``). A model
    on the local CPU needs far longer than an API, and on a busy machine longer still. None: no
    total limit, the judge watches each call's progress (``openai:`` times the first token and
    the gaps of a streamed reply)."""
    max_concurrency: int | None = None
    """Calls this judge instance may have in flight at once, over every job and request that
    uses it; None: the configured ``max_concurrency`` of the first run. An in-process model that
    answers one call at a time says 1. Set it before the first run (``get_judge(...,
    max_concurrency=8)``); later, resize :attr:`gate` instead."""
    _gate: JudgeGate | None = None

    def __init__(self, judge_id: str) -> None:
        self.judge_id = judge_id

    def open_gate(
        self, *, default_limit: int, breaker_threshold: int = 5, breaker_cooldown_s: float = 30.0
    ) -> JudgeGate:
        """This instance's in-flight limit and circuit breaker, made on first use with the
        first run's settings and shared by every later run (see :mod:`evidex.limits`)."""
        with _GATE_LOCK:
            if self._gate is None:
                self._gate = JudgeGate(
                    self.max_concurrency or default_limit,
                    breaker_threshold=breaker_threshold,
                    breaker_cooldown_s=breaker_cooldown_s,
                )
            return self._gate

    @property
    def gate(self) -> JudgeGate | None:
        """The gate once a run has opened it (None before)."""
        return self._gate

    @abc.abstractmethod
    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """Answer one request with raw text. Raise ``JudgeUnavailable`` for transport faults."""

    def fingerprint(self) -> Mapping[str, Any]:
        """Options that change judgments (model version, thresholds...), for the cache key."""
        return {}

    @property
    def model_version(self) -> str:
        return self.judge_id

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` for this judge; the default is the documented 4-chars estimate."""
        return estimate_tokens(text)

    def passage_token_limit(self, overhead_tokens: int, batch_size: int) -> int:
        """How many tokens one passage may have when ``batch_size`` passages share a prompt
        whose fixed part is ``overhead_tokens``; longer passages are truncated by preflight
        (with an event). Chat judges split what the context window leaves after the fixed
        part and a reply reserve; encoders override this with their sequence length."""
        reserve = 160 * batch_size + 200
        return max(64, (self.context_window - overhead_tokens - reserve) // max(1, batch_size))

    def answers_in_pieces(self, payload: type[Payload]) -> bool:
        """Whether the judge answers an exchange of this payload type in bounded pieces of its
        own instead of reading its prompt whole: ``local:qwen`` in score mode asks about one
        claim (or label, or passage) and a few sentences the encoder picked at a time, each
        sentence at most 60 words. A job then need not fit the exchange's prompt, and the
        retry a written reply may need, into the context window, nor cut or drop passages for
        it. Default: False, the prompt is read whole (a chat model writing its reply)."""
        return False

    def query_token_limit(self) -> int | None:
        """How many tokens of a query this judge reads, when it reads only the first ones (an
        encoder's sequence length); None when the query reaches it whole, as in a chat prompt."""
        return None

    def query_truncation(self, query: str) -> Event | None:
        """The ``query_truncated`` event when the judge will read only part of ``query``, else
        None: a job adds it to its preflight events, so a cut query is never silent."""
        limit = self.query_token_limit()
        if limit is None:
            return None
        tokens = self.count_tokens(query)
        if tokens <= limit:
            return None
        return Event(
            kind="query_truncated",
            detail=f"the query has {tokens} tokens; {self.judge_id} reads the first {limit} "
            f"of them, so the rest does not count",
            data={"tokens": tokens, "limit": limit, "chars": len(query)},
        )

    reads_prompts: ClassVar[bool] = False
    """Whether the judge reads an exchange's prose prompt and writes the reply (a chat model):
    then it can answer any job's steps, one registered later included. A judge that answers
    typed payloads only (an encoder) answers the jobs it lists in ``jobs``."""

    def supports(self, job: str) -> bool:
        return self.reads_prompts or job in self.jobs

    def staging(self) -> Staging | None:
        """The judge's stages, when it is a judge of two (a cascade); the harness runs them
        (:func:`evidex.harness.staged.staged`), so no job has to tell a cascade apart.
        Default: one stage, None."""
        return None

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections or models. Default: nothing to release."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.judge_id}>"


@dataclass(frozen=True)
class Split:
    """Which items of one query a judge's cheap stage settles and which go on."""

    settled: tuple[int, ...]
    sent: tuple[int, ...]


class Staging(Protocol):
    """A judge of two stages: the cheap one scores every item and settles those it is sure of,
    the expensive one judges the rest."""

    @property
    def cheap(self) -> Judge: ...

    @property
    def expensive(self) -> Judge: ...

    @property
    def band_source(self) -> str:
        """Where the band came from (a calibration file, an option, the shipped default)."""
        ...

    def band_edges(self) -> tuple[float, float]:
        """The uncertain band: scores from the first to the second go on."""
        ...

    def band_label(self) -> str: ...

    def frontier(self) -> FrontierRule | None:
        """The frontier rule that routes the tier job (:mod:`evidex.frontier`: the budget
        pooled over a run's queries, spent where the expensive stage keeps finding relevant
        passages); None: the band routes it."""
        ...

    @property
    def rule_source(self) -> str:
        """Where the frontier rule's settings came from (empty under the band)."""
        ...

    def none_relevant_below(self) -> float:
        """For a job with one verdict over all of a query's passages: the cheap stage settles
        the query when no passage scores this much."""
        ...

    def cheap_tier(self, score: float, tiers: Sequence[str]) -> str:
        """The cheap stage's tier for a score it settles."""
        ...

    @property
    def warnings(self) -> list[str]:
        """Why the split may be off (a band fitted with other model versions)."""
        ...

    def cheap_scorer(self) -> Judge:
        """The cheap stage as the harness calls it: a judge that answers score steps."""
        ...

    def split(self, scores: Sequence[float]) -> Split: ...
