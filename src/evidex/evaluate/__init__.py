"""Evaluation: metrics, golden sets, the evaluation runner, calibration and release gates.

Metrics live apart from I/O: ``metrics`` (kappa, nDCG, P@k, MRR, citation P/R),
``intervals`` (bootstrap intervals), ``measures`` (measure strings such as ``nDCG@10``) and
``compare`` (a run against a baseline run, item by item) read no file and call no judge.
``golden``, ``layouts`` and ``datasets`` read golden files and data set folders;
``run`` runs a job over a golden set through the jobs and writes the report; ``registry`` is
where each job's evaluator (``tier``, ``rerank``, ``classify``, ``audit``) plugs in;
``calibration`` and ``calibrate`` fit and record cut points, ``cascade_frontier`` measures a
cascade's frontier routing rule out of set, ``consistency`` re-runs shuffled,
``gate`` checks floors and baselines, ``plots`` draws and formats, ``review_export`` turns
review decisions into golden records.

What it may import: the library's public modules (``evidex.jobs``, ``evidex.tasks``,
``evidex.types``, ``evidex.errors`` ...), numpy, and matplotlib lazily for pictures; no vendor
SDK, no HTTP client and no database driver: judges and stores come in as arguments or by spec
through ``evidex.jobs``. The names below are the public surface; the modules hold the details.
"""

from evidex.evaluate.calibrate import acalibrate_tier, calibrate_tier
from evidex.evaluate.calibration import check_calibration, fit_thresholds
from evidex.evaluate.compare import compare_reports
from evidex.evaluate.consistency import atier_consistency, tier_consistency
from evidex.evaluate.gate import Gate, GateResult, GatesFailed, check_gates, load_gates, run_gates
from evidex.evaluate.golden import detect_job, load_golden, load_qrels, load_run, write_jsonl
from evidex.evaluate.measures import Measure, parse_measure
from evidex.evaluate.registry import EvalOptions, Evaluator, get_evaluator, register_evaluator
from evidex.evaluate.run import aevaluate, evaluate, read_report, score_predictions

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
    "compare_reports",
    "detect_job",
    "evaluate",
    "fit_thresholds",
    "get_evaluator",
    "load_gates",
    "load_golden",
    "load_qrels",
    "load_run",
    "parse_measure",
    "read_report",
    "register_evaluator",
    "run_gates",
    "score_predictions",
    "tier_consistency",
    "write_jsonl",
]
