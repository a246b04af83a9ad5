"""``evidex bulk JOB``: one registered job over a JSONL file of tasks, resumable.

A thin layer over :func:`evidex.bulk.run_bulk`: the flags, a progress bar on stderr (rate,
ETA, judge calls, tokens) and the summary at the end. Exit code 0 when the run completed,
also when some lines were bad (they are in the errors file, and stderr says so); 2 for bad
flags or an unreadable input; 1 when the run stopped on an internal error (rerun the same
command to resume).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn

from evidex.bulk import BulkStats, run_bulk
from evidex.bulk.run import engine_of
from evidex.bulk.stream import open_input
from evidex.bulk.tasks import line_format
from evidex.cli._app import app, err_console
from evidex.cli._derive import job_flags
from evidex.cli._group import Group
from evidex.cli._io import RunFlags, option_group, run_flags
from evidex.cli._judge import endpoint_options
from evidex.cli._judge import judge_options as cli_judge_options
from evidex.cli._options import unset_option
from evidex.cli._progress import Clock, rate_line
from evidex.errors import ConfigError
from evidex.jobs import JobDefinition, definitions

__all__ = ["bulk_app"]

bulk_app = typer.Typer(
    name="bulk",
    help="Run one job over a large JSONL file of tasks: streaming, bounded concurrency, "
    "resumable after a crash or kill -9 (each task exactly once in the output).",
    no_args_is_help=True,
    cls=Group,
    rich_markup_mode=None,  # click's layout, as the top-level app (evidex.cli._app)
)
app.add_typer(bulk_app, name="bulk")


class EngineOpt(str, Enum):
    LOCAL = "local"
    RAY = "ray"


InputOpt = Annotated[
    Path,
    typer.Option(
        "--input",
        "-i",
        metavar="IN.jsonl",
        help="The tasks, one JSON object a line, each with a unique 'id' (a string or an "
        "integer). Read one line at a time, and again on resume.",
    ),
]
BulkOutputOpt = Annotated[
    Path,
    typer.Option(
        "--output",
        "-o",
        metavar="OUT.jsonl",
        dir_okay=False,
        help="Results, one JSON object a line carrying the task's 'id', appended in "
        "completion order (--engine ray: input order). Also the checkpoint: ids already in it are "
        "skipped, so rerunning the same command resumes.",
    ),
]
ErrorsOpt = Annotated[
    Path | None,
    unset_option(
        "--errors",
        metavar="FILE",
        dir_okay=False,
        help="Bad lines, one JSON object a line with its line number, id and message. "
        "Default: OUT.errors.jsonl. Rewritten on each run.",
    ),
]
ConcurrencyOpt = Annotated[
    int | None,
    unset_option(
        "--concurrency",
        "-c",
        metavar="N",
        min=1,
        help="Tasks in flight at once; also the judge's in-flight limit for the run, unless "
        "the judge sets its own. Default: the configured max_concurrency "
        "(EVIDEX_MAX_CONCURRENCY).",
    ),
]
EngineFlag = Annotated[
    EngineOpt,
    typer.Option(
        "--engine",
        case_sensitive=False,
        help="local: this process (asyncio). ray: Ray Data, one judge per actor, on this "
        "machine or the cluster at --ray-address (pip install 'evidex[ray]').",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    unset_option(
        "--ray-address",
        metavar="ADDRESS",
        help="With --engine ray: the cluster to join (auto, ray://HOST:10001, or RAY_ADDRESS). "
        "Default: start Ray on this machine.",
    ),
]
RayWorkersOpt = Annotated[
    int | None,
    unset_option(
        "--ray-workers",
        metavar="N",
        min=1,
        help="With --engine ray: actors, each with its own judge and store connection "
        "(--concurrency tasks in flight each). Default: one per CPU.",
    ),
]


@contextmanager
def bulk_progress(
    label: str, clock: Clock = time.monotonic, console: Any = None
) -> Iterator[Callable[[BulkStats], None]]:
    """A progress bar on stderr fed by the run's counters: tasks done of those to run, the
    rate and time left measured in this run (:func:`~evidex.cli._progress.rate_line`), judge
    calls, tokens, bad lines and fallbacks."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TextColumn("{task.fields[line]}"),
        TextColumn("{task.fields[figures]}"),
        console=console or err_console,
        get_time=clock,
    )
    task = bar.add_task(label, total=None, line="", figures="")

    def update(stats: BulkStats) -> None:
        total = max(stats.total, stats.processed)
        figures = (
            f"· calls {stats.calls} · tokens "
            f"{stats.usage.prompt_tokens}+{stats.usage.completion_tokens}"
            f" · errors {stats.errors} · fallbacks {stats.fallbacks}"
        )
        line = rate_line(stats.processed, total, stats.elapsed_s, "tasks")
        bar.update(task, completed=stats.processed, total=total, line=line, figures=figures)

    with bar:
        yield update


def _run(job: str, flags: RunFlags, bulk: BulkFlags, **options: Any) -> None:
    engine_of(bulk.engine.value)  # usage errors before the judge loads
    open_input(bulk.input)
    engine_options: dict[str, Any] = {}
    if bulk.engine is EngineOpt.RAY:
        judge_options = {
            **cli_judge_options(flags.judge_option),
            **endpoint_options(flags.base_url),
        }
        engine_options = {
            "address": bulk.ray_address,
            "workers": bulk.ray_workers,
            "judge_options": judge_options,
        }
    elif bulk.ray_address is not None or bulk.ray_workers is not None:
        raise ConfigError("--ray-address and --ray-workers go with --engine ray")
    with flags.job(job) as run, bulk_progress(f"bulk {job}") as on_progress:
        stats = run_bulk(
            job,
            bulk.input,
            bulk.output,
            errors=bulk.errors,
            concurrency=bulk.concurrency,
            engine=bulk.engine.value,
            engine_options=engine_options,
            on_progress=on_progress,
            **run,
            **options,
        )
    _tell(job, stats)


def _tell(job: str, stats: BulkStats) -> None:
    """The summary on stderr; bad lines and fallbacks said out loud, exit code 0 or not."""
    if stats.truncated_bytes:
        err_console.print(
            f"repaired {stats.output}: cut a torn last line ({stats.truncated_bytes} bytes); "
            "that task ran again",
            highlight=False,
        )
    err_console.print(
        f"bulk {job}: {stats.summary()}; results in {stats.output}",
        highlight=False,
        soft_wrap=True,
    )
    if stats.errors:
        err_console.print(
            f"[yellow]warning:[/] {stats.errors} line(s) could not be run; see "
            f"{stats.errors_path} (line number, id, message)",
            highlight=False,
            soft_wrap=True,
        )
    if stats.fallbacks:
        err_console.print(
            f"[yellow]warning:[/] {stats.fallbacks} result(s) are fallbacks "
            '(source "fallback", with a review item); see evidex review',
            highlight=False,
        )


@dataclass(frozen=True)
class BulkFlags:
    """The options every bulk command has, handed to it as one value by :func:`bulk_flags`."""

    input: Path
    output: Path
    errors: Path | None = None
    concurrency: int | None = None
    engine: EngineOpt = EngineOpt.LOCAL
    ray_address: str | None = None
    ray_workers: int | None = None


_BULK_FLAGS: dict[str, tuple[Any, Any]] = {
    "input": (InputOpt, inspect.Parameter.empty),
    "output": (BulkOutputOpt, inspect.Parameter.empty),
    "errors": (ErrorsOpt, None),
    "concurrency": (ConcurrencyOpt, None),
    "engine": (EngineFlag, EngineOpt.LOCAL),
    "ray_address": (RayAddressOpt, None),
    "ray_workers": (RayWorkersOpt, None),
}
bulk_flags = option_group("bulk", BulkFlags, _BULK_FLAGS)


def _bulk_command(job: JobDefinition[Any, Any, Any]) -> Callable[..., None]:
    """``evidex bulk JOB``: the shared flags, the bulk flags and the job's own options."""

    def command(flags: RunFlags, bulk: BulkFlags, options: Any) -> None:
        _run(job.name, flags, bulk, **options.values())

    command.__doc__ = (
        f"{job.summary.rstrip('.')}, one task a line: {line_format(job)}.\n\n"
        f"Each output line is the task's id plus what evidex {job.name} prints for it. Results "
        "are written in completion order."
    )
    command.__name__ = f"bulk_{job.name}"
    command.__annotations__ = {"flags": RunFlags, "bulk": BulkFlags, "options": job.options}
    decorated = run_flags("judge", "base_url", "judge_option", "db", "verbose", "max_text_chars")(
        bulk_flags(job_flags(job)(command))
    )
    return decorated


for _job in definitions():
    bulk_app.command(_job.name)(_bulk_command(_job))
