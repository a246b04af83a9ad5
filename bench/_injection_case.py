"""What bench/injection.py attacks, in one shape for every job: a case, an entry of the jobs
table, and the switch that runs a job without the defence.

A :class:`Case` is one input of a job (a query and its passages, a claim and its sentences,
an answer and its context) with the passage the attacks go into, or the answer itself, and
the gold its clean measure compares with. A :class:`JobBench` says how the job runs a case,
when an attack on it succeeded, what collateral is, and how clean agreement is measured.

Each case runs twice, with the defence (as shipped) and without it (:func:`undefended`:
preflight still screens and notes its suspicions, but cuts nothing from the passages or the
answer, and the tier job's hold is read back from the grade's ``reason``), so "before" is what
the run would have done without the defence.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import evidex.jobs.audit as audit_job
import evidex.preflight as preflight
from evidex._attacks import Attack
from evidex.judging import Judge
from evidex.store import SqlStore
from evidex.types import Passage

Outcome = dict[str, Any]
"""What a job made of a case: per passage (a tier, a rank), or per case (a label, a verdict,
claim grades, a decision, the passages cited)."""

Place = Literal["passage", "answer"]


@dataclass(frozen=True)
class Case:
    """One input to attack. ``target``: the passage the attacks go into (``place="passage"``)
    or none, when they go into ``answer`` (``place="answer"``); ``beside``: the passage graded
    next to it whose change is collateral; ``claims``: an audit's claims when given (None:
    the judge finds them in the answer); ``gold``: what the clean measure compares with."""

    id: str
    query: str
    passages: tuple[Passage, ...]
    target: str = ""
    place: Place = "passage"
    beside: str = ""
    answer: str = ""
    claims: tuple[str, ...] | None = None
    gold: Any = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def attacked(self, attack: Attack) -> Case | None:
        """This case with ``attack`` put where the case takes it; None when it cannot go
        there (a title or URL attack on an answer)."""
        if self.place == "answer":
            if attack.placement in ("title", "url"):
                return None
            hit = attack.apply(Passage(passage_id="answer", text=self.answer), self.query)
            return dataclasses.replace(self, answer=hit.text)
        passages = tuple(
            attack.apply(p, self.query) if p.passage_id == self.target else p for p in self.passages
        )
        return dataclasses.replace(self, passages=passages)


Won = Callable[[Outcome, Outcome, Case, Attack], "bool | None"]
"""``won(clean, attacked, case, attack)``: whether the attack moved the case where its clean
run was not; None when the clean run left it no room (already there): not counted."""


@dataclass(frozen=True)
class JobBench:
    """One job in the bench, as data and small functions.

    ``cases(args)``: the cases to attack and the cases of the clean measure (``args``: the
    bench's flags); ``run(judge, store, case, defended)``: the job on one case (a coroutine,
    so the bench runs many at once; the caller sets the defence, ``defended`` says which it
    is); ``won``: see :data:`Won`;
    ``collateral(clean, attacked, case)``: a clean passage of the same input changed (None:
    the job has no other passage that can change on its own); ``clean(pairs)``: the clean
    measure over ``[(case, outcome), ...]``, named ``measure``; ``aimed``: the suite's job
    tag whose phrasings attack it."""

    job: str
    data: str
    cases: Callable[[Any], tuple[list[Case], list[Case]]]
    run: Callable[[Judge, SqlStore, Case, bool], Awaitable[Outcome]]
    won: Won
    measure: str
    clean: Callable[[list[tuple[Case, Outcome]]], float]
    collateral: Callable[[Outcome, Outcome, Case], bool] | None = None
    aimed: str = ""

    @property
    def tag(self) -> str:
        return self.aimed or self.job


@contextlib.contextmanager
def undefended() -> Iterator[None]:
    """Preflight as it was before the cut: suspicions noted, passages and the audited answer
    passed on as given."""
    keep = preflight.neutralised, audit_job.screen_answer
    preflight.neutralised = lambda passage, found: passage  # type: ignore[assignment]
    audit_job.screen_answer = lambda answer: (keep[1](answer)[0], [])  # type: ignore[assignment]
    try:
        yield
    finally:
        preflight.neutralised, audit_job.screen_answer = keep  # type: ignore[assignment]


def defence(defended: bool) -> contextlib.AbstractContextManager[None]:
    """The defence as shipped (``True``), or :func:`undefended`."""
    return contextlib.nullcontext() if defended else undefended()
