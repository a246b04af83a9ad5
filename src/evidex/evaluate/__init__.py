"""Evaluation: metrics, golden sets, the evaluation runner, calibration and release gates.

Metrics live apart from I/O: ``metrics`` (kappa, nDCG, P@k, MRR, citation P/R, bootstrap
intervals) and ``measures`` (measure strings such as ``nDCG@10``) read no file and call no
judge. ``golden``, ``layouts`` and ``datasets`` read golden files and data set folders;
``run`` runs a job over a golden set through the jobs and writes the report; ``registry`` is
where each job's evaluator (``tier``, ``rerank``, ``classify``, ``audit``) plugs in;
``calibration`` and ``calibrate`` fit and record cut points, ``cascade_frontier`` measures a
cascade's frontier routing rule out of set, ``consistency`` re-runs shuffled,
``gate`` checks floors, ``plots`` draws and formats, ``review_export`` turns review decisions
into golden records.

What it may import: the library's public modules (``evidex.jobs``, ``evidex.tasks``,
``evidex.types``, ``evidex.errors`` ...), numpy, and matplotlib lazily for pictures; no vendor
SDK, no HTTP client and no database driver: judges and stores come in as arguments or by spec
through ``evidex.jobs``. The names below are the public surface; the modules hold the details.
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
