"""One tier calibration's golden set, as both calibrations (cut points, cascade band) use it.

Both evaluate a judge on the golden set with the ordinary resumable evaluation, read the same
sampled golden pairs again to fit on, and write ``calibration.json`` the same way, with the
judge's id, model version and the run's prompt version (what the staleness check compares).
Written once here, so the two records cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidex.evaluate._util import jsonable
from evidex.evaluate.calibration import CALIBRATION_FILE, calibration_record
from evidex.evaluate.golden import TierGolden
from evidex.evaluate.registry import EvalOptions
from evidex.evaluate.run import aevaluate, load_records
from evidex.harness.ports import StorePort
from evidex.judging import Judge

__all__ = ["GoldenRun"]

JOB = "tier"
"""The job these calibrations fit (cut points and bands map scores to tiers)."""


@dataclass(frozen=True)
class GoldenRun:
    """The golden set (``golden``, sampled by ``sample`` with the seed of ``options``), the
    store the evaluation caches in, and ``out``, the directory of the calibration."""

    golden: str | Path
    store: StorePort | str | None
    out: Path
    sample: int | None
    options: EvalOptions

    async def evaluate(
        self,
        judge: Judge,
        *,
        out: Path | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """The evaluation report of ``judge`` (written in ``out``, default the run's)."""
        return await aevaluate(
            JOB,
            self.golden,
            judge=judge,
            store=self.store,
            out_dir=out or self.out,
            sample=self.sample,
            options=self.options,
            on_progress=on_progress,
        )

    def records(self) -> list[TierGolden]:
        """The golden pairs the evaluation judged (the same sample)."""
        _, records = load_records(JOB, self.golden, self.options, sample=self.sample)
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
            job=JOB,
            judge_id=judge.judge_id,
            model_version=judge.model_version,
            prompt_version=report["run"]["prompt_version"],
            golden=str(self.golden),
            report=report,
            fitted=fitted,
        )
        record.update(figures)
        record["warnings"] = warnings
        (self.out / CALIBRATION_FILE).write_text(
            json.dumps(jsonable(record), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return record
