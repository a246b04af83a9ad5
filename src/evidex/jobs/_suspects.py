"""How every job treats evidence that preflight flagged as aimed at the grader.

Preflight screens each passage (and the audit's answer), notes a ``suspected_injection``
event per suspicion and cuts the flagged stretches out of what the judge reads, for every job
at once (:func:`evidex.preflight.prepare_passages`); a quote is valid only inside the text
left. What is left to a job is one rule, said here once: at medium and high risk, a result
that rests on flagged evidence goes to a person (tier: each flagged passage; rerank: a
flagged passage in the top-k; classify: a label whose only support is flagged passages;
a verdict that the passages suffice: flagged support; audit: a flagged answer, or claims backed
by a flagged passage). At low risk the result stands on the text left, and the events say
what was cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from evidex.preflight import suspected
from evidex.types import RiskLevel

__all__ = ["SUSPECTED_REASON", "Suspects"]

SUSPECTED_REASON = "suspected injection"
"""How every job's review reason starts when flagged evidence sent the result to a person."""


@dataclass(frozen=True)
class Suspects:
    """The passages an input's preflight flagged, and whether its risk routes them."""

    ids: frozenset[str]
    risk: RiskLevel = RiskLevel.LOW

    @classmethod
    def of(cls, events: Iterable[object], risk: RiskLevel | str = RiskLevel.LOW) -> Suspects:
        return cls(frozenset(suspected(events)), RiskLevel(risk))

    @property
    def routed(self) -> bool:
        """Whether a result resting on flagged evidence goes to review (medium, high risk)."""
        return self.risk is not RiskLevel.LOW

    def __contains__(self, passage_id: object) -> bool:
        return passage_id in self.ids

    def among(self, passage_ids: Iterable[str]) -> list[str]:
        """The flagged ones of ``passage_ids``, in their order, each once."""
        return [p for p in dict.fromkeys(passage_ids) if p in self.ids]

    def only(self, passage_ids: Iterable[str]) -> bool:
        """Whether ``passage_ids`` are some passages, every one flagged."""
        ids = list(passage_ids)
        return bool(ids) and all(p in self.ids for p in ids)

    def to_route(self, passage_ids: Iterable[str]) -> list[str]:
        """The flagged ones of ``passage_ids`` when the risk routes them, else none."""
        return self.among(passage_ids) if self.routed else []

    @staticmethod
    def reason(where: str) -> str:
        """A review reason: text aimed at the grader in ``where`` (``"the passage"``, ``"the
        only support of label X"``...)."""
        return f"{SUSPECTED_REASON}: text aimed at the grader in {where}"
