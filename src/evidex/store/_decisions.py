"""Which decisions a review item accepts, checked when the decision is written.

The allowed values depend on the job and on the item: each job's review payload model (its
``JobDefinition.review``, see :mod:`evidex.jobs._review`) names the decisions it takes, and
:mod:`evidex.evaluate.review_export` turns the same forms into golden rows, so what is written
here is what the export understands. A job no definition names takes ``accept``/``reject``.

The jobs sit above the store (they open one), so the store never imports them: it finds a
job's definition by the module its one registration line names (:mod:`evidex._registered`),
when a decision is written, as the jobs' registry does.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from evidex._registered import JOBS
from evidex.errors import InputError
from evidex.types import AUDIT_STATUSES

__all__ = ["AUDIT_STATUSES", "MAX_DECISION_CHARS", "check_decision", "same_meaning"]


MAX_DECISION_CHARS = 10_000


def check_decision(job: str, item: Mapping[str, Any], decision: str) -> str:
    """``decision`` as it will be stored (trimmed; keywords lower-cased), or an
    :class:`~evidex.errors.InputError` naming the values this item allows."""
    registered = JOBS.get(job)
    if registered is None:  # an item a caller wrote by hand, of a job nobody registered
        value = decision.strip().lower()
        if value not in ("accept", "reject"):
            raise InputError(
                f"decision {decision.strip()[:60]!r} is not allowed; allowed: accept, reject"
            )
        return value
    return str(_review(registered.module).check(item, decision, limit=MAX_DECISION_CHARS))


def same_meaning(job: str, item: Mapping[str, Any], decisions: Sequence[str]) -> bool:
    """Whether ``decisions`` (each one the item allows) all say the same of ``item``: the
    job's review model reads each (``accept`` of the judge's tier is that tier; a tier for the
    one passage is a mapping of it), so two reviewers who agree in other words agree."""
    registered = JOBS.get(job)
    if registered is None:
        return len({x.strip().lower() for x in decisions}) <= 1
    review = _review(registered.module)
    meanings = [review.meaning(item, decision) for decision in decisions]
    return all(m == meanings[0] for m in meanings[1:])


def _review(module: str) -> Any:
    return importlib.import_module(module).DEFINITION.review
