"""Evaluation: metrics, golden sets, the evaluation runner, calibration and release gates.

``metrics`` and ``measures`` do no I/O; ``golden`` and ``datasets`` read files; ``run`` runs a
job over a golden set through the harness; ``registry`` is where each job's evaluator plugs in.
The names below are the public surface; the modules hold the details.
"""

from evidex.evaluate.calibrate import acalibrate_tier, calibrate_tier
from evidex.evaluate.calibration import check_calibration, fit_thresholds
from evidex.evaluate.consistency import atier_consistency, tier_consistency
from evidex.evaluate.gate import Gate, GateResult, GatesFailed, check_gates, load_gates
from evidex.evaluate.golden import detect_job, load_golden, load_qrels, load_run, write_jsonl
from evidex.evaluate.measures import Measure, parse_measure
from evidex.evaluate.registry import EvalOptions, Evaluator, get_evaluator, register_evaluator
from evidex.evaluate.run import aevaluate, evaluate, score_predictions

__all__ = [
    "EvalOptions",
    "Evaluator",
    "Gate",
    "GateResult",
    "GatesFailed",
    "Measure",
    "acalibrate_tier",
    "aevaluate",
    "atier_consistency",
    "calibrate_tier",
    "check_calibration",
    "check_gates",
    "detect_job",
    "evaluate",
    "fit_thresholds",
    "get_evaluator",
    "load_gates",
    "load_golden",
    "load_qrels",
    "load_run",
    "parse_measure",
    "register_evaluator",
    "score_predictions",
    "tier_consistency",
    "write_jsonl",
]
