"""One calibration's golden set, as every calibration (cut points, cascade band, a decision
threshold) use it.

Each evaluates a judge on the golden set with the ordinary resumable evaluation, reads the same
sampled golden records again to fit on, and writes ``calibration.json`` the same way, with the
judge's id, model version and the run's prompt version (what the staleness check compares).
Written once here, so the records cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidex.evaluate._util import jsonable
from evidex.evaluate.calibration import CALIBRATION_FILE, calibration_record
from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.run import aevaluate, load_records
from evidex.harness.ports import StorePort
from evidex.judging import Judge

__all__ = ["GoldenRun"]

JOB = "tier"
"""The job the tier calibrations fit (cut points and bands map scores to tiers), the default."""


@dataclass(frozen=True)
class GoldenRun:
    """The golden set (``golden``, sampled by ``sample`` with the seed of ``options``), the
    store the evaluation caches in, ``out``, the directory of the calibration, and the job
    whose golden set it is."""

    golden: str | Path
    store: StorePort | str | None
    out: Path
    sample: int | None
    options: EvalOptions
    job: str = JOB

    async def evaluate(
        self,
        judge: Judge | str | None,
        *,
        judge_options: Mapping[str, Any] | None = None,
        out: Path | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """The evaluation report of ``judge`` (written in ``out``, default the run's)."""
        return await aevaluate(
            self.job,
            self.golden,
            judge=judge,
            judge_options=judge_options,
            store=self.store,
            out_dir=out or self.out,
            sample=self.sample,
            options=self.options,
            on_progress=on_progress,
        )

    def records(self) -> list[Any]:
        """The golden records the evaluation judged (the same sample): tier pairs
        (:class:`~evidex.evaluate.golden.TierGolden`) for the default job."""
        _, records = load_records(self.job, self.golden, self.options, sample=self.sample)
        return records

    def write(
        self,
        judge: Judge,
        report: Mapping[str, Any],
        fitted: Mapping[str, Any] | None,
        warnings: list[str],
        **figures: Any,
    ) -> dict[str, Any]:
        """Write ``calibration.json`` for ``judge`` and return it: the evaluation's figures
        (``figures`` replace or add some, e.g. the cascade's own kappa), what was fitted and
        the warnings."""
        record = calibration_record(
            job=self.job,
            judge_id=judge.judge_id,
            model_version=judge.model_version,
            prompt_version=report["run"]["prompt_version"],
            golden=str(self.golden),
            report=report,
            fitted=fitted,
        )
        record.update(figures)
        record["warnings"] = warnings
        return self.save(record)

    def save(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write ``record`` as the run's ``calibration.json`` (NaN as null) and return it."""
        (self.out / CALIBRATION_FILE).write_text(
            json.dumps(jsonable(record), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return record
