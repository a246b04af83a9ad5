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

    [[gate]]
    report = "reports/eval-tier/report.json"
    baseline = "reports/baseline-tier/report.json"   # ... and against a pinned run
    tolerance = 0.02                                  # optional, default 0
    floors = { kappa = 0.0 }

**Against a baseline.** A gate with a ``baseline`` report (or every gate of the baseline's job,
with ``evidex gate --baseline FILE``) also compares its report with the baseline on the metrics
it has floors for (:func:`evidex.evaluate.compare.compare_reports`: a paired bootstrap over the
items both reports hold, the gate's ``seed``). It fails on a **significant regression**: the
95% interval of the difference (report minus baseline) lies wholly below ``-tolerance`` for a
figure where higher is better (wholly above ``tolerance`` where lower is better); a drop whose
interval reaches that line is noise the golden set cannot tell apart, and passes. Shares with
no better direction (``abstention_rate``, ``escalation_rate``) are never a regression.

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

__all__ = [
    "BaselineResult",
    "Gate",
    "GateResult",
    "GateRun",
    "GatesFailed",
    "check_gates",
    "load_gates",
    "run_gates",
]

_KEYS = {
    "name", "job", "golden", "judge", "sample", "seed", "output", "report", "floors", "options",
    "judge_options", "baseline", "tolerance",
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
    baseline: Path | None = None
    """A report of an earlier run to compare with (see the module's docstring)."""
    tolerance: float = 0.0
    """How far a metric may fall against the baseline before a significant fall fails."""


@dataclass(frozen=True)
class GateResult:
    gate: str
    metric: str
    value: float | None
    floor: float
    passed: bool
    report: str


@dataclass(frozen=True)
class BaselineResult:
    """One gated metric against the baseline: the paired interval of the difference."""

    gate: str
    metric: str
    baseline_value: float
    value: float
    difference: float
    low: float
    high: float
    tolerance: float
    regressed: bool
    baseline: str
    report: str
    unit: str

    def message(self) -> str:
        """What a failed check says: the metric, the change and its interval."""
        return (
            f"{self.metric} went from {self.baseline_value:.3f} to {self.value:.3f} "
            f"({self.difference:+.3f}, 95% interval {self.low:+.3f} to {self.high:+.3f} over "
            f"the {self.unit}s both reports hold, wholly beyond the tolerance of "
            f"{self.tolerance:g}) against {self.baseline}"
        )


@dataclass(frozen=True)
class GateRun:
    """What ``evidex gate`` checked: every floor, and every gated metric of a gate that has a
    baseline against it."""

    floors: list[GateResult]
    baselines: list[BaselineResult]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.floors) and not any(r.regressed for r in self.baselines)


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
    tolerance = entry.get("tolerance", 0.0)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise ConfigError(f"{where}: 'tolerance' must be a number of at least 0, got {tolerance!r}")
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
        baseline=resolve("baseline"),
        tolerance=float(tolerance),
    )


Runner = Callable[[Gate], Mapping[str, Any]]


def check_gates(gates: list[Gate], run: Runner | None = None) -> list[GateResult]:
    """Each gate's metrics against their floors (see :func:`run_gates`, which also compares
    with a baseline)."""
    return run_gates(gates, run).floors


def run_gates(
    gates: list[Gate],
    run: Runner | None = None,
    *,
    baseline: str | Path | None = None,
    tolerance: float | None = None,
) -> GateRun:
    """Each gate's metrics against their floors and, for a gate with a baseline, against it.

    A gate with a ``report`` reads it when it exists; the others are evaluated with ``run``
    (default: :func:`.run.evaluate`). ``baseline`` is the baseline of every gate whose report
    is of its job (``evidex gate --baseline``), ``tolerance`` the tolerance of every gate; each
    in place of what the gates file says.

    The reports that gates only read, and the baselines, are checked first, all of them: a
    missing report, a metric it lacks or a baseline that cannot be compared is a
    :class:`ConfigError` naming every such gate before any evaluation runs, since an
    evaluation may take minutes and the outcome would be exit 2 all the same."""
    run = run or _evaluate
    _check_reports(gates)
    baselines = _baselines(gates, baseline)
    floors: list[GateResult] = []
    compared: list[BaselineResult] = []
    for gate, pinned in zip(gates, baselines, strict=True):
        report: Mapping[str, Any]
        if gate.report is not None and gate.report.exists():
            report, source = read_json_object(gate.report, "report"), str(gate.report)
        elif gate.golden is not None:
            report = run(gate)
            source = str((gate.output or Path(f"reports/gate-{gate.job}")) / "report.json")
        else:
            raise ConfigError(f"gate {gate.name!r}: report {gate.report} does not exist")
        floors += _floors(gate, report, source)
        if pinned is not None:
            allowed = gate.tolerance if tolerance is None else tolerance
            compared += _against(gate, report, source, pinned, allowed)
    return GateRun(floors, compared)


def _floors(gate: Gate, report: Mapping[str, Any], source: str) -> list[GateResult]:
    metrics = report.get("metrics", {})
    results = []
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


Pinned = tuple[str, dict[str, Any]]
"""A baseline: where it was read from, and the report."""


def _baselines(gates: list[Gate], given: str | Path | None) -> list[Pinned | None]:
    """The baseline report of each gate that has one, read and checked before anything runs:
    ``given`` goes to every gate of its job (the job a gate's report file or ``job`` names)."""
    from evidex.evaluate.run import read_report

    cli = (str(given), read_report(given)) if given is not None else None
    found: list[Pinned | None] = []
    for gate in gates:
        job = gate.job
        if job is None and gate.report is not None and gate.report.exists():
            job = read_json_object(gate.report, "report").get("job")
        if cli is not None and job == cli[1].get("job"):
            found.append(cli)
        elif gate.baseline is not None:
            found.append((str(gate.baseline), read_report(gate.baseline)))
        else:
            found.append(None)
        if found[-1] is not None and gate.golden is None and gate.report is not None:
            read_report(gate.report)  # a report only read is checked now, not after others ran
    if cli is not None and not any(v is cli for v in found):
        raise ConfigError(
            f"the baseline {given} is a {cli[1].get('job')} report, and no gate checks "
            f"{cli[1].get('job')}"
        )
    return found


def _against(
    gate: Gate,
    report: Mapping[str, Any],
    source: str,
    pinned: Pinned,
    tolerance: float,
) -> list[BaselineResult]:
    from evidex.evaluate.compare import check_report, compare_reports, regressed

    check_report(report, source)
    comparison = compare_reports(pinned[1], report, seed=gate.seed)
    rows = {row["measure"]: row for row in comparison["metrics"]}
    results = []
    for metric, _ in gate.floors:
        row = rows.get(metric)
        if row is None or row["better"] is None:
            continue  # not in the baseline, or a share with no better direction
        results.append(
            BaselineResult(
                gate=gate.name,
                metric=metric,
                baseline_value=row["baseline"],
                value=row["report"],
                difference=row["difference"],
                low=row["low"],
                high=row["high"],
                tolerance=tolerance,
                regressed=regressed(row, tolerance),
                baseline=pinned[0],
                report=source,
                unit=comparison["unit"],
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
