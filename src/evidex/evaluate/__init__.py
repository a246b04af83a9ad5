"""Evaluation: metrics, golden sets, the evaluation runner, calibration and release gates.

``metrics`` and ``measures`` do no I/O; ``golden`` and ``datasets`` read files; ``run`` runs a
job over a golden set through the harness; ``registry`` is where each job's evaluator plugs in.
"""
