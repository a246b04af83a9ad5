"""``cascade:CHEAP,EXPENSIVE``: a judge of two judges, the cheap one settling the easy items.

Why: an encoder judge (``local:minilm``) is fast and free but weak; a reading judge
(``openai:...``, ``local:qwen``) is strong but costs a call per batch. Most retrieved passages
are easy (clearly irrelevant, or clearly on topic), and the encoder places those as well as the
reader does. The cascade lets the cheap judge score every item and sends only the items whose
score falls in an *uncertain band* to the expensive judge.

How the jobs use it:

- **tier**: the cheap judge scores every passage (the harness's score step, validated and
  audit-logged under the cheap judge's id). A passage scoring outside the band ``[low, high)``
  gets the cheap judge's tier for that score (its own cut points, e.g. ``local:minilm``'s
  ``thresholds.json``); the passages inside it go, in batches, to the expensive judge through
  the ordinary tier step of the harness (validation, re-asks, fallback, review). Every
  assignment says which stage judged it (``judged_by``), and the result's ``cascade`` report
  gives the split and the calls (and cost, when priced) saved against the expensive judge
  alone.
- **rerank** with ``strategy="pointwise"``: the cheap judge scores every candidate; those
  above the band keep their cheap order at the top, those below it at the bottom, and the
  band in between is ordered by the expensive judge's scores (each ranked passage says which
  stage placed it, ``judged_by``; a ``cascade.split`` event gives the split and the calls
  saved). Other rerank strategies pass through to the expensive judge.
- a job with **one verdict over all of a query's passages** (whether they suffice to answer
  it): the cheap judge scores every passage first; when none reaches
  :meth:`CascadeJudge.none_relevant_below` (nothing on the query's topic), the cheap stage
  settles the query as lacking what it needs, a named heuristic; otherwise the whole query
  goes to the expensive judge. The job's own run does this (it reads :meth:`Judge.staging`).
- **classify**, **audit**: passed through to the expensive judge (the cheap encoder cannot
  abstain on a claim or a label, so there is nothing it could settle safely); the result
  names the cascade as its judge.

The rule that routes the tier job. ``rule=band`` (the default) sends the passages scored in the
band; ``rule=frontier`` (:mod:`evidex.frontier`) sends the query's top ``start`` share by the
cheap score, then one ``step`` share at a time while the expensive judge found the last share
sent relevant, until ``budget`` of the passages are sent, and settles the rest in the lowest
tier: the cheap stage never settles an upper grade. Each tier call routes its own query, with
that query's budget (what ``bench/cascade_frontier.py`` reports *per query*; one budget pooled
over a run's queries is measured there, not done by the jobs yet). Its settings come from
``budget=``, ``start=``, ``step=``, ``width=``, else from a frontier file (``band_path=``, in
the shape of the shipped one), else from the shipped default for the cheap judge
(``evidex/data/cascade/frontier.json``). Rerank and the cheap stage's "nothing relevant" edge
keep the band under either rule.

The band. ``band=LOW:HIGH`` sets it; ``band_path=FILE`` reads one written by
``evidex calibrate tier --judge cascade:...`` (the smallest band whose kappa against the
golden set stays within a target of the expensive judge alone, at the 5th percentile of a
bootstrap over the golden queries); without either, the shipped
default for the cheap judge (``evidex/data/cascade/band.json``, fitted on LLMJudge dev data)
is used. A cheap judge with no shipped default and no band given sends every item on
(``band=-inf:inf``), which saves nothing but is never wrong. A band file made with other
model versions of either stage is *stale*: the judge warns (:attr:`CascadeJudge.warnings`,
logged, and noted on every tier result) until it is calibrated again.

Options (``get_judge("cascade:local:minilm,openai:gpt-4o-mini", **options)``, or
``--judge-option`` on the command line), routed to the stage they belong to:

==========================  ============================================================
``band``, ``band_path``, ``none_relevant_below``, ``rule``, ``budget``, ``start``, ``step``,
``width``                   the cascade's own
``cheap.NAME``              option ``NAME`` of the cheap stage
``expensive.NAME``          option ``NAME`` of the expensive stage
``base_url``, ``base_urls``, ``api_key``  the ``openai:`` stage (the expensive one when both are)
any other ``NAME``          the expensive stage
==========================  ============================================================

so ``--base-url`` and ``OPENAI_*`` settings reach the ``openai:`` stage, and a misspelled
option is refused by the stage it reached. Preflight fits passages to the expensive judge's
budget (it reads them whole); the encoder reads its first 256 word pieces, as it always does.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from evidex.errors import ConfigError
from evidex.frontier import FrontierRule
from evidex.judges._cascade_routing import (
    FORMAT,
    FRONTIER_OPTIONS,
    Band,
    FrontierFile,
    frontier_of,
    load_band,
    load_routing,
)
from evidex.judges._window import BorrowedWindow
from evidex.judging import Judge, JudgeReply, JudgeRequest, Split

__all__ = [
    "FORMAT",
    "Band",
    "CascadeJudge",
    "FrontierFile",
    "TierScorer",
    "load_band",
    "load_routing",
    "route_options",
    "split_spec",
]

logger = logging.getLogger("evidex")

OWN_OPTIONS = frozenset({"band", "band_path", "none_relevant_below", "rule", *FRONTIER_OPTIONS})
ENDPOINT_OPTIONS = frozenset({"base_url", "base_urls", "api_key"})
_PREFIXES = ("openai:", "local:", "cascade:")


class CutPoints(Protocol):
    """Tier cut points of a scoring judge (``local:minilm``'s ``thresholds.json``)."""

    def for_tiers(self, count: int) -> tuple[float, ...]: ...


@runtime_checkable
class TierScorer(Protocol):
    """A cheap stage: scores texts, and maps a score to a tier by its own cut points."""

    thresholds: CutPoints

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


def split_spec(spec: str, known: Sequence[str] = _PREFIXES) -> tuple[str, str]:
    """``cascade:CHEAP,EXPENSIVE`` → ``(CHEAP, EXPENSIVE)``.

    The split is at the first comma followed by the start of a judge spec, so a stage spec may
    hold colons (``openai:org/model:tag``) and even commas that do not start a judge.
    """
    body = spec.partition(":")[2] if spec.startswith("cascade:") else ""
    for i, char in enumerate(body):
        if char == "," and body[i + 1 :].lstrip().startswith(tuple(known)):
            cheap, expensive = body[:i].strip(), body[i + 1 :].strip()
            if cheap and expensive:
                return cheap, expensive
    raise ConfigError(
        f"a cascade spec is cascade:CHEAP,EXPENSIVE (e.g. cascade:local:minilm,openai:gpt-4o-mini)"
        f", got {spec!r}"
    )


def route_options(
    cheap: str, expensive: str, options: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Options of (the cascade, the cheap stage, the expensive stage); see the module table."""
    own: dict[str, Any] = {}
    stages: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    endpoint = 1 if expensive.startswith("openai:") or not cheap.startswith("openai:") else 0
    for name, value in options.items():
        stage, dot, rest = name.partition(".")
        if dot and stage in ("cheap", "expensive"):
            stages[stage == "expensive"][rest] = value
        elif name in OWN_OPTIONS:
            own[name] = value
        elif name in ENDPOINT_OPTIONS:
            stages[endpoint][name] = value
        else:
            stages[1][name] = value
    return own, stages[0], stages[1]


class CascadeJudge(BorrowedWindow):
    """The cheap judge settles items scored outside the band; the rest go to the expensive one.

    ``CascadeJudge(cheap, expensive, band=Band(low=0.3, high=0.7))`` in Python; ``band=None``
    takes the shipped default for the cheap judge (see the module docstring).
    """

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank", "classify", "audit"})
    splits: ClassVar[frozenset[str]] = frozenset({"tier", "rerank"})
    """The jobs whose items the cheap stage may settle; the others pass through."""

    def __init__(
        self,
        cheap: Judge,
        expensive: Judge,
        *,
        band: Band | str | None = None,
        band_source: str = "",
        none_relevant_below: float | None = None,
        frontier: FrontierRule | FrontierFile | None = None,
        frontier_source: str = "",
    ) -> None:
        super().__init__(f"cascade:{cheap.judge_id},{expensive.judge_id}")
        if not isinstance(cheap, TierScorer):
            raise ConfigError(
                f"the cheap stage of a cascade must score passages and map scores to tiers "
                f"(local:minilm does); {cheap.judge_id} does not"
            )
        self.cheap = cheap
        self.expensive = expensive
        self.context_window = expensive.context_window
        if cheap.default_timeout_s is None or expensive.default_timeout_s is None:
            self.default_timeout_s = None  # a stage watches its calls' progress: no total
        else:
            self.default_timeout_s = max(cheap.default_timeout_s, expensive.default_timeout_s)
        if isinstance(band, str):
            band, band_source = Band.parse(band), band_source or "band option"
        if band is None:
            band = load_band(None, cheap.judge_id)
            band_source = "shipped default" if band is not None else "no band: all sent on"
        self.band = band or Band(low=-math.inf, high=math.inf)
        self.band_source = band_source or "given"
        self._none_relevant_below = none_relevant_below
        self.frontier_file = frontier if isinstance(frontier, FrontierFile) else None
        self.rule = frontier.frontier if isinstance(frontier, FrontierFile) else frontier
        """The frontier rule that routes the tier job; None: the band routes it."""
        self.rule_source = (frontier_source or "given") if frontier is not None else ""
        self.warnings = self._stale()
        for warning in self.warnings:
            logger.warning("%s", warning)

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> CascadeJudge:
        """Build both stages from ``cascade:CHEAP,EXPENSIVE``, options routed to each."""
        from evidex.judges import JUDGES, get_judge

        cheap_spec, expensive_spec = split_spec(spec, list(JUDGES))
        own, cheap_options, expensive_options = route_options(cheap_spec, expensive_spec, options)
        if "band" in own and "band_path" in own:
            raise ConfigError("give the cascade band= or band_path=, not both")
        cheap = get_judge(cheap_spec, **cheap_options)
        expensive = get_judge(expensive_spec, **expensive_options)
        band: Band | str | None = own.get("band")
        source = ""
        routed = None if "band_path" not in own else load_routing(own["band_path"])
        if isinstance(routed, Band):
            band, source = routed, str(own["band_path"])
        below = own.get("none_relevant_below")
        try:
            below = None if below is None else float(below)
        except (TypeError, ValueError):
            raise ConfigError(f"none_relevant_below must be a number, got {below!r}") from None
        frontier, frontier_source = frontier_of(own, routed, cheap.judge_id)
        return cls(
            cheap,
            expensive,
            band=band,
            band_source=source,
            none_relevant_below=below,
            frontier=frontier,
            frontier_source=frontier_source,
        )

    def _stale(self) -> list[str]:
        """Warnings when the band or the frontier rule was fitted with other model versions
        of the stages."""
        fitted: list[tuple[Band | FrontierFile, str]] = [(self.band, self.band_source)]
        if self.frontier_file is not None:
            fitted.append((self.frontier_file, self.rule_source))
        found = []
        for made, source in fitted:
            for stage, judge, then in (
                ("cheap", self.cheap, made.cheap_version),
                ("expensive", self.expensive, made.expensive_version),
            ):
                if then and then != judge.model_version and not source.endswith("shipped default"):
                    found.append(
                        f"stale cascade {made.rule} ({source}): it was fitted with {stage} "
                        f"judge {then!r}, this run uses {judge.model_version!r}; recalibrate "
                        f"(evidex calibrate tier --judge {self.judge_id})"
                    )
        return found

    # ------------------------------------------------------------------ the split

    def split(self, scores: Sequence[float]) -> Split:
        """Items settled by the cheap stage (outside the band) and those sent on (inside)."""
        sent = tuple(i for i, s in enumerate(scores) if self.band.uncertain(s))
        taken = set(sent)
        return Split(tuple(i for i in range(len(scores)) if i not in taken), sent)

    def none_relevant_below(self) -> float:
        """The score no passage of a query reaches when the cheap stage settles the whole
        query (the option, else the band's own value, else its ``low``)."""
        if self._none_relevant_below is not None:
            return self._none_relevant_below
        found = self.band.none_relevant_below
        return self.band.low if found is None else found

    def cheap_tier(self, score: float, tiers: Sequence[str]) -> str:
        """The cheap stage's tier for ``score``: the first tier whose cut point it reaches."""
        cuts = cast(TierScorer, self.cheap).thresholds.for_tiers(len(tiers))
        return tiers[next((i for i, c in enumerate(cuts) if score >= c), len(cuts))]

    # ------------------------------------------------------------------ judge interface

    def supports(self, job: str) -> bool:
        return self.expensive.supports(job) and (job not in self.splits or self.cheap.supports(job))

    def staging(self) -> CascadeJudge:
        return self

    def band_edges(self) -> tuple[float, float]:
        return (self.band.low, self.band.high)

    def band_label(self) -> str:
        return self.band.label()

    def frontier(self) -> FrontierRule | None:
        return self.rule

    def cheap_scorer(self) -> Judge:
        from evidex.judges.scoring import ScoringJudge

        return ScoringJudge(self.cheap)

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """A request that reaches the cascade itself (a job it does not split) passes through
        to the expensive judge."""
        return await self.expensive.complete(request)

    def fingerprint(self) -> Mapping[str, Any]:
        return {
            "cheap": {"id": self.cheap.judge_id, **self.cheap.fingerprint()},
            "expensive": {"id": self.expensive.judge_id, **self.expensive.fingerprint()},
            "band": [self.band.low, self.band.high],
            "none_relevant_below": self.none_relevant_below(),
            "rule": "band" if self.rule is None else self.rule.model_dump(),
        }

    @property
    def model_version(self) -> str:
        """Both stages' versions (not the band: a calibration record names the judge it was
        fitted for, and the band it wrote must not make that record stale)."""
        return f"{self.cheap.model_version} -> {self.expensive.model_version}"

    @property
    def window_judge(self) -> Judge:
        return self.expensive

    async def aclose(self) -> None:
        await self.cheap.aclose()
        await self.expensive.aclose()
