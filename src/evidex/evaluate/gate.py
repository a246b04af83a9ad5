"""Release gates: floors on evaluation metrics, read from a TOML file, for a user's CI.

``gates.toml``::

    [[gate]]
    name = "tier agreement"              # optional, shown in the table
    job = "tier"
    golden = "golden/tier.jsonl"         # run the evaluation (cached, resumable) ...
    judge = "local:minilm"               # optional: the job's default judge
    sample = 100                         # optional; seed = 0 by default
    output = "reports/gate-tier"         # optional: where its report goes
    options = { tiers = "tiers.yaml", batch_size = 10 }   # optional: the job's eval options
    judge_options = { threads = 2 }      # optional: options of the judge spec
    floors = { kappa = 0.7, kappa_linear = 0.75 }

    [[gate]]
    report = "reports/eval-rerank/report.json"   # ... or read a report made earlier
    floors = { "nDCG@10" = 0.6, "P(rel=2)@10" = 0.4 }

``options`` are those of ``evidex eval`` for the job (``tiers`` and ``taxonomy`` name files,
``strategy``, ``top_n``, ``batch_size``...); the gate measures the job as it will run.
Relative paths are resolved from the file's folder. Metric names are measure strings
(:mod:`evidex.evaluate.measures`): an unknown one, an unknown key or a metric the report does
not have is a :class:`ConfigError`; an undefined value (``null``: kappa on a single label) fails
its floor.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidex.errors import ConfigError, RunError
from evidex.evaluate._util import read_json_object
from evidex.evaluate.measures import parse_measure
from evidex.evaluate.registry import FILE_OPTIONS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["Gate", "GateResult", "GatesFailed", "check_gates", "load_gates"]

_KEYS = {
    "name", "job", "golden", "judge", "sample", "seed", "output", "report", "floors", "options",
    "judge_options",
}  # fmt: skip


class GatesFailed(RunError):
    """At least one metric is under its floor (the configuration itself was fine)."""


@dataclass(frozen=True)
class Gate:
    name: str
    floors: tuple[tuple[str, float], ...]
    """(canonical measure, floor) pairs."""
    report: Path | None = None
    job: str | None = None
    golden: Path | None = None
    judge: str | None = None
    sample: int | None = None
    seed: int = 0
    output: Path | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    judge_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GateResult:
    gate: str
    metric: str
    value: float | None
    floor: float
    passed: bool
    report: str


def load_gates(path: str | Path) -> list[Gate]:
    """Parse and check a gates file (every gate needs floors and a report or a golden set)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the gates file: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    entries = data.get("gate")
    unknown_top = set(data) - {"gate"}
    if unknown_top:
        raise ConfigError(f"{path}: unknown top-level keys {sorted(unknown_top)}; use [[gate]]")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: no [[gate]] entries")
    return [_gate(path, i, entry) for i, entry in enumerate(entries, 1)]


def _gate(path: Path, number: int, entry: Mapping[str, Any]) -> Gate:
    where = f"{path}: gate {number}"
    unknown = set(entry) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    floors = entry.get("floors")
    if not isinstance(floors, dict) or not floors:
        raise ConfigError(f"{where}: 'floors' must be a table of metric = minimum")
    parsed = []
    for metric, floor in floors.items():
        try:
            measure = parse_measure(str(metric))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        if isinstance(floor, bool) or not isinstance(floor, (int, float)):
            raise ConfigError(f"{where}: the floor of {metric} must be a number, got {floor!r}")
        parsed.append((str(measure), float(floor)))
    base = path.parent

    def resolve(key: str) -> Path | None:
        value = entry.get(key)
        return None if value is None else base / str(value)

    if entry.get("report") is None and (entry.get("golden") is None or entry.get("job") is None):
        raise ConfigError(f"{where}: give either 'report' or both 'job' and 'golden'")
    name = str(entry.get("name") or entry.get("job") or entry.get("report"))
    tables = {}
    for key in ("options", "judge_options"):
        table = entry.get(key, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: '{key}' must be a table, got {table!r}")
        tables[key] = table
    options = {k: base / str(v) if k in FILE_OPTIONS else v for k, v in tables["options"].items()}
    return Gate(
        name=name,
        floors=tuple(parsed),
        report=resolve("report"),
        job=entry.get("job"),
        golden=resolve("golden"),
        judge=entry.get("judge"),
        sample=entry.get("sample"),
        seed=int(entry.get("seed", 0)),
        output=resolve("output"),
        options=options,
        judge_options=tables["judge_options"],
    )


Runner = Callable[[Gate], Mapping[str, Any]]


def check_gates(gates: list[Gate], run: Runner | None = None) -> list[GateResult]:
    """Each gate's metrics against their floors. A gate with a ``report`` reads it when it
    exists; the others are evaluated with ``run`` (default: :func:`.run.evaluate`).

    The reports that gates only read are checked first, all of them: a missing report or a
    metric it lacks is a :class:`ConfigError` naming every such gate before any evaluation
    runs, since an evaluation may take minutes and the outcome would be exit 2 all the same."""
    run = run or _evaluate
    _check_reports(gates)
    results = []
    for gate in gates:
        report: Mapping[str, Any]
        if gate.report is not None and gate.report.exists():
            report, source = read_json_object(gate.report, "report"), str(gate.report)
        elif gate.golden is not None:
            report = run(gate)
            source = str((gate.output or Path(f"reports/gate-{gate.job}")) / "report.json")
        else:
            raise ConfigError(f"gate {gate.name!r}: report {gate.report} does not exist")
        metrics = report.get("metrics", {})
        for metric, floor in gate.floors:
            if metric not in metrics:
                raise ConfigError(
                    f"gate {gate.name!r}: the report {source} has no metric {metric!r}; it has "
                    f"{', '.join(sorted(metrics))}"
                )
            value = metrics[metric]
            defined = isinstance(value, (int, float)) and not math.isnan(value)
            results.append(
                GateResult(
                    gate=gate.name,
                    metric=metric,
                    value=float(value) if defined else None,
                    floor=floor,
                    passed=defined and float(value) >= floor,
                    report=source,
                )
            )
    return results


def _check_reports(gates: list[Gate]) -> None:
    """Raise one :class:`ConfigError` listing each gate whose report cannot be gated: it does
    not exist (and the gate has no golden set to make it), or lacks a metric with a floor."""
    problems = []
    for gate in gates:
        if gate.report is None or gate.golden is not None:
            continue
        if not gate.report.exists():
            problems.append(f"gate {gate.name!r}: report {gate.report} does not exist")
            continue
        metrics = read_json_object(gate.report, "report").get("metrics", {})
        problems += [
            f"gate {gate.name!r}: the report {gate.report} has no metric {metric!r}; it has "
            f"{', '.join(sorted(metrics))}"
            for metric, _ in gate.floors
            if metric not in metrics
        ]
    if problems:
        raise ConfigError("; ".join(problems) + "; no gate was run")


def _evaluate(gate: Gate) -> Mapping[str, Any]:
    from evidex.evaluate.registry import EvalOptions, load_file_options
    from evidex.evaluate.run import evaluate

    if gate.job is None or gate.golden is None:
        raise ConfigError(f"gate {gate.name!r} needs 'job' and 'golden' to run an evaluation")
    return evaluate(
        gate.job,
        gate.golden,
        judge=gate.judge,
        judge_options=gate.judge_options or None,
        out_dir=gate.output or Path(f"reports/gate-{gate.job}"),
        sample=gate.sample,
        options=EvalOptions(seed=gate.seed, extra=load_file_options(gate.options)),
    )
