"""The evaluator registry: how ``evidex eval JOB`` finds the code that evaluates ``JOB``.

An evaluator is a small object with the interface below; :func:`evidex.evaluate.run.evaluate`
does the rest (sampling, the resumable progress file, the progress bar, writing
``predictions.jsonl``, ``report.json`` and ``report.md``, the stale-calibration warning).
Which evaluator a job has is part of the job's definition (its ``evaluation``, see
:class:`evidex.jobs.Evaluation`): to add one, write ``evidex/evaluate/<job>.py`` with a class
implementing :class:`Evaluator` (most derive from :class:`evidex.evaluate._base.GoldenEvaluator`)
and name it in the definition. :func:`register_evaluator` puts another one in its place at run
time (kept in :data:`EVALUATORS`, which the definitions are read after).

The interface, in the order the runner uses it::

    job: str                                   # "tier", "rerank", ...
    prompt_version: str                        # the task template's version (hash)
    def load(path, options) -> list[record]    # golden records (evidex.evaluate.golden)
    def group(record) -> str                   # the unit of work, kept in the progress file
                                               # (one query for tier/rerank, one item else)
    async def predict(records, judge, store, options, settings) -> list[dict]
                                               # JSON-able prediction rows for one group
    def key(row_or_record) -> str              # joins a prediction row to its golden record
    def score(records, rows, options) -> dict  # {"metrics": {measure: value}, ...}: the body
                                               # of report.json; measures are canonical
                                               # strings of evidex.evaluate.measures
    def markdown(report, out_dir) -> str       # the job's part of report.md; may write
                                               # pictures into out_dir
    def figures(items, report) -> dict         # the metrics from the report's items (or a
                                               # resample of them): what evidex eval compare
                                               # recomputes (see evidex.evaluate._base)

Optional: ``async def consistency(records, judge, store, options) -> dict`` (re-runs with the
input shuffled and split differently; used by ``--consistency``).

``options`` is an :class:`EvalOptions`: job-specific settings (tier scheme, batch size...) travel
in ``options.extra`` so the shared runner never needs to know them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evidex.errors import ConfigError
from evidex.harness.ports import StorePort
from evidex.harness.runner import HarnessSettings
from evidex.jobs import definition, definitions, job_names
from evidex.judging import Judge

__all__ = [
    "EVALUATORS",
    "FILE_OPTIONS",
    "EvalOptions",
    "Evaluator",
    "get_evaluator",
    "load_file_options",
    "register_evaluator",
]


@dataclass(frozen=True)
class EvalOptions:
    """Settings of one evaluation. ``extra`` holds job-specific ones (e.g. ``tiers``)."""

    seed: int = 0
    bootstrap_samples: int = 1000
    worst: int = 10
    """How many of the worst disagreements the report lists."""
    extra: Mapping[str, Any] = field(default_factory=dict)


FILE_OPTIONS = frozenset({"tiers", "taxonomy"})
"""Job options given as a file (a tier scheme, a taxonomy) and read before the evaluation."""


def load_file_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with each file-valued one (:data:`FILE_OPTIONS`) read into its object."""
    from evidex.taxonomy import Taxonomy
    from evidex.types import TierScheme

    loaders = {"tiers": TierScheme.from_file, "taxonomy": Taxonomy.from_file}
    return {k: loaders[k](v) if k in loaders else v for k, v in options.items()}


class Evaluator(Protocol):
    job: str

    @property
    def prompt_version(self) -> str: ...

    def load(self, path: Path, options: EvalOptions) -> list[Any]: ...

    def group(self, record: Any) -> str: ...

    async def predict(
        self,
        records: Sequence[Any],
        judge: Judge,
        store: StorePort,
        options: EvalOptions,
        settings: HarnessSettings | None,
    ) -> list[dict[str, Any]]: ...

    def key(self, item: Any) -> str: ...

    def score(
        self, records: Sequence[Any], rows: Sequence[Mapping[str, Any]], options: EvalOptions
    ) -> dict[str, Any]: ...

    def markdown(self, report: Mapping[str, Any], out_dir: Path) -> str: ...

    def figures(
        self, items: Sequence[Mapping[str, Any]], report: Mapping[str, Any]
    ) -> dict[str, float]: ...


@runtime_checkable
class RunsTogether(Protocol):
    """An evaluator that may predict several groups in one run (tier, under a cascade's
    frontier rule, whose budget the queries of a run share)."""

    def run_together(self, judge: Judge, settings: HarnessSettings | None) -> int:
        """How many groups one :meth:`predict_together` call takes; 1: one at a time."""
        ...

    async def predict_together(
        self,
        groups: Sequence[Sequence[Any]],
        judge: Judge,
        store: StorePort,
        options: EvalOptions,
        settings: HarnessSettings | None,
    ) -> list[list[dict[str, Any]]]: ...


EVALUATORS: dict[str, Evaluator] = {}
"""Evaluators put in place at run time (:func:`register_evaluator`) and those already built
from the definitions, by job."""


def register_evaluator(evaluator: Evaluator) -> None:
    """Make ``evaluator`` the one for ``evaluator.job`` (replaces an earlier one)."""
    EVALUATORS[evaluator.job] = evaluator


def _evaluated() -> list[str]:
    """The registered jobs that declare an evaluation, and the jobs registered at run time."""
    declared = [d.name for d in definitions() if d.evaluation is not None]
    return sorted({*declared, *EVALUATORS})


def get_evaluator(job: str) -> Evaluator:
    """The evaluator of ``job``: the one registered at run time, else the one its definition
    names; a job without one is a :class:`ConfigError` naming the jobs that have one."""
    found = EVALUATORS.get(job)
    if found is not None:
        return found
    evaluation = definition(job).evaluation if job in job_names() else None
    if evaluation is None:
        known = ", ".join(_evaluated())
        raise ConfigError(f"no evaluator for job {job!r}; jobs with an evaluator: {known}")
    built: Evaluator = evaluation.make_evaluator()
    EVALUATORS[job] = built
    return built
