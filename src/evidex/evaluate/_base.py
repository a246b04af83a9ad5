"""What every evaluator does the same way, written once: the run and report shape.

An evaluator (:class:`~evidex.evaluate.registry.Evaluator`) predicts a group of golden records
with the job, joins prediction rows to golden records, scores and renders. The joining, the
loop over a group's records and the order of scoring are the same for every job; a job's
evaluator says only what differs: how one record is predicted (:meth:`predict_one`, or
:meth:`predict_group` for a job that judges a group in one call), which keys join a row to a
record, and what the figures are (:meth:`measure`, given the rows already aligned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from evidex.evaluate._util import align_rows, interval_dict
from evidex.evaluate.intervals import Interval, bootstrap_cis
from evidex.evaluate.registry import EvalOptions
from evidex.harness.ports import StorePort
from evidex.harness.runner import HarnessSettings
from evidex.jobs import definition
from evidex.judging import Judge

if TYPE_CHECKING:
    from evidex.evaluate.layouts import Layout

__all__ = ["REPORT_FORMAT", "GoldenEvaluator", "Prediction", "Scoring", "declared_measures"]

REPORT_FORMAT = 2
"""The layout of ``report.json``: 2 keeps every item (see above); 1 (reports without a
``report_format`` key, written before items were kept) has the figures alone."""

G = TypeVar("G")


def declared_measures(job: str) -> tuple[str, ...]:
    """The measures ``job``'s definition says its reports carry (none when not evaluated)."""
    evaluation = definition(job).evaluation
    return evaluation.measures if evaluation is not None else ()


@dataclass(frozen=True)
class Prediction:
    """What predicting a golden group runs with: the judge, the store, the evaluation's
    options and the harness settings."""

    judge: Judge
    store: StorePort
    options: EvalOptions
    settings: HarnessSettings | None


@dataclass(frozen=True)
class Scoring(Generic[G]):
    """What scoring reads: the golden ``records``, the prediction ``rows`` in the same order
    (one per record) and the evaluation's ``options``."""

    records: Sequence[G]
    rows: Sequence[Mapping[str, Any]]
    options: EvalOptions


class GoldenEvaluator(Generic[G]):
    """The shared part of an evaluator whose records are keyed by their ``id`` by default.

    Subclasses set :attr:`job`, :attr:`what` (the noun of a record in "golden ... have no
    prediction") and :attr:`layouts`, and implement :attr:`prompt_version`, :meth:`load`,
    :meth:`predict_one` (or :meth:`predict_group`), :meth:`measure` and :meth:`markdown`.
    """

    job: ClassVar[str]
    what: ClassVar[str] = "item"
    layouts: ClassVar[tuple[Layout, ...]] = ()
    """The data set folder layouts this job reads (see :mod:`evidex.evaluate.layouts`)."""

    @property
    def prompt_version(self) -> str:
        raise NotImplementedError

    def load(self, path: Path, options: EvalOptions) -> list[G]:
        raise NotImplementedError

    # ------------------------------------------------------------------ joining

    def record_keys(self, record: G) -> Sequence[str]:
        """Keys a prediction row may join ``record`` by, tried in order."""
        keyed: Any = record  # golden rows with an ``id`` (a subclass keys others otherwise)
        return [str(keyed.id)]

    def row_keys(self, row: Mapping[str, Any]) -> Sequence[str]:
        """Keys of a prediction row, tried in order."""
        return [str(row.get("id"))]

    def label(self, record: G) -> str:
        """How a record without a prediction is named in the error."""
        return self.record_keys(record)[0]

    def group(self, record: G) -> str:
        """The unit of work kept in the progress file: each record alone, by default."""
        return self.record_keys(record)[0]

    def key(self, item: Any) -> str:
        """The join key of a golden record or of a prediction row."""
        if isinstance(item, Mapping):
            return self.row_keys(item)[0]
        return self.record_keys(item)[0]

    def align(
        self, records: Sequence[G], rows: Sequence[Mapping[str, Any]], options: EvalOptions
    ) -> list[Mapping[str, Any]]:
        """The prediction row of each golden record, in golden order (see
        :func:`~evidex.evaluate._util.align_rows`); a job may check the rows against its
        options first (tier: every tier is one of the scheme's)."""
        return align_rows(records, rows, self.record_keys, self.row_keys, self.what, self.label)

    # ------------------------------------------------------------------ running

    async def predict(
        self,
        records: Sequence[G],
        judge: Judge,
        store: StorePort,
        options: EvalOptions,
        settings: HarnessSettings | None,
    ) -> list[dict[str, Any]]:
        """JSON-able prediction rows for one group of records."""
        return await self.predict_group(records, Prediction(judge, store, options, settings))

    async def predict_group(self, records: Sequence[G], run: Prediction) -> list[dict[str, Any]]:
        """One row per record, each predicted alone and in turn."""
        return [await self.predict_one(record, run) for record in records]

    async def predict_one(self, record: G, run: Prediction) -> dict[str, Any]:
        raise NotImplementedError

    def score(
        self, records: Sequence[G], rows: Sequence[Mapping[str, Any]], options: EvalOptions
    ) -> dict[str, Any]:
        """The report body: rows joined to their records, then the job's figures."""
        return self.measure(Scoring(records, self.align(records, rows, options), options))

    def measure(self, scoring: Scoring[G]) -> dict[str, Any]:
        raise NotImplementedError

    def measured(
        self,
        items: Sequence[Mapping[str, Any]],
        context: Mapping[str, Any],
        options: EvalOptions,
        shown: Sequence[str],
    ) -> tuple[dict[str, float], dict[str, Interval]]:
        """The metrics of ``items`` (:meth:`figures`, ``context`` standing for the report)
        and the bootstrap intervals of those in ``shown``: each resample of the items is
        scored once for every figure (:func:`~evidex.evaluate.intervals.bootstrap_cis`)."""
        intervals = bootstrap_cis(
            items,
            lambda s: self.figures(s, context),
            samples=options.bootstrap_samples,
            seed=options.seed,
        )
        return {k: v.value for k, v in intervals.items()}, {k: intervals[k] for k in shown}

    def figures(
        self, items: Sequence[Mapping[str, Any]], report: Mapping[str, Any]
    ) -> dict[str, float]:
        """The report's metrics computed from ``items`` (all of a report's, or a resample of
        them); ``report`` gives what the figures depend on besides (the tier scheme, the
        taxonomy's labels). :meth:`measure` computes a report's metrics with it, so a metric
        recomputed from the report's items is the metric the report states."""
        raise NotImplementedError

    def report(
        self,
        metrics: Mapping[str, float],
        intervals: Mapping[str, Interval],
        *,
        sources: Mapping[str, int],
        warnings: Sequence[str],
        items: Sequence[Mapping[str, Any]],
        **parts: Any,
    ) -> dict[str, Any]:
        """A report body: what every job's holds (the job, its figures keyed by measure
        string, their bootstrap intervals), the job's own ``parts``, then where the predictions
        came from (see :func:`~evidex.evaluate._util.source_counts`), how many fell back, the
        warnings (no report leaves out that some of its figures rest on fallbacks), and last
        the items the figures were computed from (see above)."""
        shown = {k: interval_dict(v) for k, v in intervals.items()}
        return {
            "report_format": REPORT_FORMAT,
            "job": self.job,
            "unit": self.what,
            "metrics": dict(metrics),
            "intervals": shown,
            **parts,
            "fallbacks": sources.get("fallback", 0),
            "sources": dict(sources),
            "warnings": list(warnings),
            "items": [dict(item) for item in items],
        }

    def markdown(self, report: Mapping[str, Any], out_dir: Path) -> str:
        raise NotImplementedError
