"""``evidex eval`` and ``evidex calibrate``: thin layers over :mod:`evidex.evaluate`.

Comparing two runs (``evidex eval compare``) and the release gates (``evidex gate``) are in
:mod:`evidex.cli.gate`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from evidex.cli._app import app, renamed
from evidex.cli._io import RunFlags, open_db, option_group, progress, run_flags
from evidex.cli._judge import endpoint_options, judge_options
from evidex.cli._options import tiers_option, unset_option
from evidex.cli._tables import print_table
from evidex.errors import ConfigError
from evidex.evaluate.calibration import CALIBRATION_FILE
from evidex.evaluate.plots import fmt_value
from evidex.evaluate.registry import EvalOptions, load_file_options
from evidex.evaluate.run import evaluate, score_predictions
from evidex.jobs import Evaluation, definitions

__all__ = [
    "GoldenFlags",
    "calibrate_command",
    "eval_command",
    "golden_flags",
]

R = TypeVar("R")

_EVALUATED = [d.name for d in definitions() if d.evaluation is not None]
_FITTED = [d.name for d in definitions() if d.evaluation is not None and d.evaluation.calibrate]

GoldenOpt = Annotated[
    Path,
    typer.Option(
        "--golden", "-g", metavar="FILE", help="Golden set (JSONL, see docs/evaluation.md)."
    ),
]
SampleOpt = Annotated[
    int | None,
    unset_option(
        "--sample",
        metavar="N",
        help="Evaluate a seeded random sample of N golden items (default: all); with "
        "--predictions, the same --sample and --seed score the items that run chose.",
    ),
]
SeedOpt = Annotated[
    int, typer.Option("--seed", metavar="S", help="Seed of the sample and the bootstrap.")
]
OutOpt = Annotated[
    Path | None,
    unset_option(
        "--output",
        "-o",
        metavar="DIR",
        help="Report directory. Default: reports/eval-JOB (reports/calibration-JOB).",
    ),
]
TiersOpt = Annotated[
    Path | None,
    tiers_option("Tier definitions (YAML/JSON) when the golden set uses your own tiers."),
]


@dataclass(frozen=True)
class GoldenFlags:
    """The options of a run over a golden set that ``evidex eval`` and ``evidex calibrate``
    share, handed to each as one value by :func:`golden_flags`."""

    golden: Path
    sample: int | None = None
    seed: int = 0
    output: Path | None = None
    tiers: Path | None = None

    def out(self, default: str) -> Path:
        """The report directory: ``--output``, else ``default``."""
        return self.output or Path(default)

    def run(self, out: Path, **job_options: Any) -> dict[str, Any]:
        """The ``out_dir``, ``sample`` and ``options`` keywords of the run; ``job_options``
        (rerank strategy, classify taxonomy...) that were not given are left out, so each
        evaluator applies its own defaults."""
        given = {"tiers": self.tiers, **job_options}
        extra = {k: v for k, v in given.items() if v is not None and v is not False}
        options = EvalOptions(seed=self.seed, extra=load_file_options(extra))
        return {"out_dir": out, "sample": self.sample, "options": options}


_GOLDEN_FLAGS: dict[str, tuple[Any, Any]] = {
    "golden": (GoldenOpt, inspect.Parameter.empty),
    "sample": (SampleOpt, None),
    "seed": (SeedOpt, 0),
    "output": (OutOpt, None),
    "tiers": (TiersOpt, None),
}


def golden_flags(command: Callable[..., R]) -> Callable[..., R]:
    """Add :class:`GoldenFlags`' options to a command, which declares ``data: GoldenFlags``."""
    return option_group("data", GoldenFlags, _GOLDEN_FLAGS)(command)


@contextmanager
def _judged(flags: RunFlags, label: str) -> Iterator[dict[str, Any]]:
    """The ``judge``, ``judge_options``, ``store`` and ``on_progress`` keywords of a run that
    judges a golden set (``evidex eval``, ``evidex calibrate``)."""
    options = judge_options(flags.judge_option) | endpoint_options(flags.base_url)
    with open_db(flags.db) as store, progress(2, label) as on_progress:
        yield {
            "judge": flags.judge,
            "judge_options": options,
            "store": store,
            "on_progress": on_progress,
        }


@app.command("eval")
@run_flags("judge", "base_url", "judge_option", "db")
@golden_flags
def eval_command(
    data: GoldenFlags,
    flags: RunFlags,
    job: Annotated[
        str | None,
        typer.Argument(
            metavar="[JOB]",
            show_default=False,
            help=f"{', '.join(_EVALUATED)} (with --predictions: default from the golden file).",
        ),
    ] = None,
    predictions: Annotated[
        Path | None,
        unset_option(
            "--predictions",
            metavar="FILE",
            help="Score these predictions (JSONL) instead of running a judge.",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        unset_option(
            "--batch-size",
            metavar="N",
            help="Tier batch size (5-15, default 10).",
        ),
    ] = None,
    strategy: Annotated[
        str | None,
        unset_option(
            "--strategy",
            metavar="NAME",
            help="rerank: allpairs, listwise, pairwise or pointwise (default pointwise).",
        ),
    ] = None,
    top_n: Annotated[
        int | None,
        unset_option(
            "--top-n",
            metavar="N",
            help="rerank: how many candidates to rerank (default 30; the rest keep their order).",
        ),
    ] = None,
    top_k: Annotated[
        int | None,
        unset_option("--top-k", metavar="K", help="rerank: top k (pairwise only)."),
    ] = None,
    taxonomy: Annotated[
        Path | None,
        unset_option(
            "--labels",
            metavar="FILE",
            help="classify: label definitions (YAML/JSON), as evidex classify --labels takes "
            "them; default SciFact's for its labels.",
        ),
    ] = None,
    old_taxonomy: Annotated[
        Path | None,
        unset_option("--taxonomy", metavar="FILE", hidden=True, help="The old --labels."),
    ] = None,
    multi_label: Annotated[
        bool, typer.Option("--multi-label", help="classify: allow several labels per item.")
    ] = False,
    claims: Annotated[
        str | None,
        unset_option(
            "--claims",
            metavar="MODE",
            help="audit: gold (give the job the gold claims), extract (let it find them) or "
            "auto (gold for one-claim answers; the default).",
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        unset_option(
            "--calibration",
            metavar="FILE",
            help="Calibration file to check for staleness. Default: "
            f"reports/calibration-JOB/{CALIBRATION_FILE} when it exists.",
        ),
    ] = None,
    consistency: Annotated[
        bool,
        typer.Option(
            "--consistency",
            help="Also re-run shuffled and re-split, and report the kappa between runs.",
        ),
    ] = False,
) -> None:
    """Evaluate a job against a golden set (a JSONL file or a TREC DL, LLMJudge, WiCE or
    SciFact folder): its figures with intervals, confusion matrix, worst disagreements.
    Writes report.json, report.md and predictions.jsonl; resumable. To compare two runs item
    by item: evidex eval compare BASELINE REPORT."""
    job_options = {
        "batch_size": batch_size,
        "strategy": strategy,
        "top_n": top_n,
        "top_k": top_k,
        "taxonomy": renamed("--labels", taxonomy, "--taxonomy", old_taxonomy),
        "multi_label": multi_label,
        "claims": claims,
    }
    if predictions is not None:
        out = data.out(f"reports/eval-{job or 'scored'}")
        run = data.run(out, **job_options)
        report = score_predictions(job, predictions, data.golden, **run)
        _summary(report, out)
        return
    if job is None:
        raise ConfigError(
            "name the job to evaluate (evidex eval tier --golden FILE), or give --predictions"
        )
    out = data.out(f"reports/eval-{job}")
    default_cal = Path(f"reports/calibration-{job}") / CALIBRATION_FILE
    with _judged(flags, f"eval {job}") as judged:
        report = evaluate(
            job,
            data.golden,
            calibration=calibration or (default_cal if default_cal.exists() else None),
            consistency=consistency,
            **data.run(out, **job_options),
            **judged,
        )
    _summary(report, out)


@app.command("calibrate")
@run_flags("judge", "base_url", "judge_option", "db")
@golden_flags
def calibrate_command(
    job: Annotated[
        str, typer.Argument(metavar="JOB", help=f"The job to calibrate ({', '.join(_FITTED)}).")
    ],
    data: GoldenFlags,
    flags: RunFlags,
    target: Annotated[
        float | None,
        typer.Option(
            "--target",
            min=0.0,
            help="Cascade judges: the kappa the cascade may lose against its expensive stage "
            "alone; the band that sends the fewest items while staying within it on 95% of "
            "bootstrap resamples of the queries is fitted. A job that fits a threshold to abstain "
            "at: the share of answerable questions that may be abstained on. [default: 0.02]",
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            min=0.0,
            max=1.0,
            help="Cascade judges, instead of --target: the share of items the expensive stage "
            "may see (0.5 = half); the band with the best kappa that sends at most that share "
            "on 95% of bootstrap resamples of the queries is fitted.",
        ),
    ] = None,
) -> None:
    """Measure a judge against a golden set, show which tier boundaries cause disagreements,
    fit cut points for score-based judges (the uncertain band for cascade judges; a policy's
    threshold to abstain at, measured out of set), and record judge/model/prompt versions."""
    calibrate = _evaluation_part(job, "calibration", lambda e: e.calibrator())
    if target is not None and budget is not None:
        raise ConfigError("give --target (kappa to keep) or --budget (share to send), not both")
    if budget == 0:
        raise ConfigError(
            "--budget must be above 0: a cascade that sends nothing is its cheap stage alone"
        )
    out = data.out(f"reports/calibration-{job}")
    with _judged(flags, f"calibrate {job}") as judged:
        fit = {"target": 0.02 if target is None else target, "budget": budget}
        record = calibrate(data.golden, **data.run(out), **fit, **judged)
    console = Console(stderr=True)
    if record.get("summary"):  # a calibration that says itself what it fitted
        for line in [*record["summary"], *(f"warning: {w}" for w in record.get("warnings", []))]:
            console.print(Text(line, style="yellow" if line.startswith("warning: ") else ""))
        console.print(Text(f"wrote {out / CALIBRATION_FILE}"))
        return
    if (record.get("fitted") or {}).get("band_file"):
        _print_band(console, record)
        return
    console.print(
        Text(
            f"kappa {fmt_value(record['kappa'])}, linear-weighted "
            f"{fmt_value(record['kappa_linear'])} ({record['judge_id']})"
        )
    )
    table = Table(title="disagreements by tier boundary", title_justify="left")
    for name in ("boundary", "judge lower", "judge higher", "share"):
        table.add_column(name)
    for b in record["boundaries"]["adjacent"]:
        table.add_row(b["boundary"], str(b["down"]), str(b["up"]), fmt_value(b["share"]))
    print_table(console, table)
    fitted = record.get("fitted")
    if fitted:
        console.print(
            Text(
                f"fitted cut points {[round(c, 4) for c in fitted['cut_points']]}: kappa "
                f"{fmt_value(fitted['kappa'])} in sample, "
                f"{fmt_value(fitted['kappa_two_fold'])} two-fold"
            )
        )
    for warning in record.get("warnings", []):
        console.print(Text(f"warning: {warning}", style="yellow"))
    console.print(Text(f"wrote {out / CALIBRATION_FILE}"))
    thresholds = (fitted or {}).get("thresholds_file")
    if thresholds:
        console.print(
            Text(
                f"wrote {thresholds}; to grade with these cut points, add --judge-option "
                f"thresholds_path={thresholds} to evidex tier, evidex bulk tier or evidex eval "
                f'tier (in Python: get_judge("{record["judge_id"]}", '
                f'thresholds_path="{thresholds}"))'
            )
        )
    option = (fitted or {}).get("judge_option")
    if option:
        console.print(
            Text(
                f"to grade with these cut points, add --judge-option {option} to evidex tier, "
                "evidex bulk tier or evidex eval tier"
            )
        )
    console.print(
        Text(
            f"evidex eval tier --calibration {out / CALIBRATION_FILE} (the default for "
            "reports/calibration-tier) warns when the judge, its model or the prompt has "
            "changed since: then calibrate again"
        )
    )


def _ci(bounds: Any) -> str:
    """``(95% CI low–high)``, or nothing when there is no interval."""
    if not bounds:
        return ""
    return f"(95% CI {fmt_value(bounds[0])} to {fmt_value(bounds[1])})"


def _print_band(console: Console, record: dict[str, Any]) -> None:
    fitted = record["fitted"]
    out = fitted.get("out_of_set") or {}
    console.print(
        Text(
            f"band [{fitted['low']}, {fitted['high']}) ({fitted.get('rule', 'two-sided band')}); "
            f"out of set (fit on one half of the queries, measured on the other, both ways, "
            f"pooled): kappa {fmt_value(fitted['kappa_two_fold'])} "
            f"{_ci(out.get('kappa_interval'))}, expensive alone "
            f"{fmt_value(out.get('kappa_expensive', fitted['kappa_expensive']))} on the same "
            f"pairs (difference "
            f"{fmt_value(out.get('kappa_minus_expensive'))} "
            f"{_ci(out.get('kappa_minus_expensive_interval'))}), "
            f"{fmt_value(fitted['share_sent_two_fold'])} of the items sent "
            f"({record['judge_id']}); fitted for the {fitted['objective']}"
        )
    )
    for fold in fitted.get("folds", []):
        console.print(
            Text(
                f"  fit on {len(fold['fit_queries'])} queries, measured on "
                f"{len(fold['measured_queries'])}: kappa {fmt_value(fold['kappa'])} "
                f"{_ci(fold['kappa_interval'])} vs expensive {fmt_value(fold['kappa_expensive'])}"
                f", {fmt_value(fold['share_sent'])} sent"
            )
        )
    for warning in record.get("warnings", []):
        console.print(Text(f"warning: {warning}", style="yellow"))
    console.print(
        Text(
            f"wrote {fitted['band_file']} and {Path(fitted['band_file']).parent / CALIBRATION_FILE}"
            f"; to grade with this band, add --judge-option band_path={fitted['band_file']}"
        )
    )


def _evaluation_part(
    job: str, what: str, part: Callable[[Evaluation], Callable[..., Any] | None]
) -> Callable[..., Any]:
    """The function of ``job``'s evaluation that ``what`` runs (its calibration, its review
    export); a job without one is a :class:`ConfigError` naming the jobs that have it."""
    found = {
        d.name: fn
        for d in definitions()
        if d.evaluation is not None and (fn := part(d.evaluation)) is not None
    }
    if job not in found:
        jobs = f"{', '.join(found)} job{'s' if len(found) > 1 else ''}"
        raise ConfigError(f"{what} is implemented for the {jobs}, not {job!r}")
    return found[job]


def _summary(report: dict[str, Any], out: Path) -> None:
    console = Console(stderr=True)
    metrics = report["metrics"]
    if "kappa" in metrics:
        interval = report.get("intervals", {}).get("kappa", {})
        line = f"kappa {fmt_value(metrics.get('kappa'))}"
        if interval.get("low") is not None and not math.isnan(interval["low"]):
            line += f" (95% CI {interval['low']:.3f}-{interval['high']:.3f})"
        if "bar" in report:
            line += " meets" if report["bar"]["passed"] else " is below"
            line += f" the {report['bar']['floor']} bar"
        console.print(Text(line))
        shown = [k for k in ("kappa_linear", "kappa_quadratic", "accuracy", "macro_f1")]
    else:
        shown = list(metrics)
    baseline = report.get("baseline", {})
    for key in shown:
        if key in metrics:
            extra = f" (retrieval order {fmt_value(baseline[key])})" if key in baseline else ""
            console.print(Text(f"{key} {fmt_value(metrics[key])}{extra}"))
    for warning in report.get("warnings", []):
        console.print(Text(f"warning: {warning}", style="yellow"))
    console.print(Text(f"wrote {out / 'report.json'} and {out / 'report.md'}"))
