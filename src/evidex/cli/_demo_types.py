"""The data of ``evidex demo``: the bundled example with its author's labels, and the run.

Shared by the pipeline (:mod:`evidex.cli.demo`) and its view (:mod:`evidex.cli._demo_view`),
which both import from here and not from each other.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

import evidex
from evidex.jobs import DemoCase
from evidex.taxonomy import Taxonomy
from evidex.types import Passage

__all__ = [
    "INSTALL_HINT",
    "ClaimCheck",
    "DemoAnswer",
    "DemoClaim",
    "DemoClassify",
    "DemoExample",
    "DemoRun",
    "SkippedStep",
    "StepNote",
    "StepTiming",
    "load_demo",
]

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
    steps: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each later job's part of the example (``JobDefinition.demo``), by job name."""

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
    """A progress report: a step started (with its judge and what to expect), advanced (its
    judge calls done of the total, and the seconds so far), ended or was skipped."""

    step: str
    status: Literal["start", "progress", "done", "skipped"]
    index: int
    of: int
    judge_id: str | None = None
    seconds: float | None = None
    message: str | None = None
    done: int | None = None
    total: int | None = None


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


class CascadeView(BaseModel):
    """What a cascade did to the tier step, or, with no expensive stage, would do (a preview).

    ``preview``: no expensive judge ran; the split is the shipped band applied to the encoder's
    scores, and the calls are those an expensive judge would have been sent."""

    preview: bool
    cheap: str
    expensive: str | None
    band: tuple[float, float]
    band_source: str
    settled: int
    sent: int
    calls_alone: int
    calls_sent: int


class DemoPartRun(BaseModel):
    """What a later job's demo step checked (see :class:`evidex.jobs.DemoPart`)."""

    title: str
    judge_id: str
    cases: list[DemoCase]

    def agreement(self) -> tuple[int, int]:
        return sum(c.agrees for c in self.cases), len(self.cases)


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
    cascade: CascadeView | None = None
    parts: dict[str, DemoPartRun] = Field(default_factory=dict)
    """The steps of later jobs (their definitions' ``demo``), by job name, in run order."""
    steps: list[str] = Field(default_factory=list)
    """Every step in run order, for their numbers."""

    def number(self, step: str) -> int:
        """The step's number as the progress lines and the sections give it."""
        return self.steps.index(step) + 1

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
            **{
                name: sum(c.source == "fallback" for c in part.cases)
                for name, part in self.parts.items()
            },
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
            "cascade": None if self.cascade is None else self.cascade.model_dump(mode="json"),
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
            **{
                name: {
                    "judge": part.judge_id,
                    "cases": [c.model_dump(mode="json") for c in part.cases],
                    "agreement": list(part.agreement()),
                }
                for name, part in self.parts.items()
            },
            "skipped": [s.model_dump() for s in self.skipped],
            "timings": [t.model_dump() for t in self.timings],
        }
