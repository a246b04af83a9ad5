"""Progress on stderr as the run measures it: items done of the total, the rate this run has
reached (items a second, or seconds an item for slow judges) and the time left at that rate.

Nothing here remembers how long something took elsewhere: a figure measured on another machine,
or at another load, says little about this run, so every number comes from the run's own clock.
:func:`rate_line` is the one wording, used by the job commands' bars (:func:`progress`), by
``evidex bulk`` and by the demo's step lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Clock", "clock_text", "progress", "rate_line", "spinner"]

Clock = Callable[[], float]
"""Seconds from an arbitrary start (``time.monotonic``; a test passes its own)."""


def clock_text(seconds: float) -> str:
    """A duration as a person reads it: ``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min"


def rate_line(done: int, total: int | None, elapsed_s: float, unit: str) -> str:
    """``3/10 batches · 2.1 s/batch · about 15 s left``: the count, the rate measured over
    ``elapsed_s`` (items a second when more than one goes by each second, else seconds an
    item) and the time left at that rate; before the first item is done, the time so far."""
    one = _singular(unit)
    count = f"{done}/{total} {unit}" if total is not None else f"{done} {unit}"
    if done <= 0 or elapsed_s <= 0:
        return f"{count} · {clock_text(max(elapsed_s, 0.0))} so far"
    per_item = elapsed_s / done
    rate = f"{1 / per_item:.1f} {unit}/s" if per_item < 1 else f"{per_item:.1f} s/{one}"
    if total is None or done >= total:
        return f"{count} · {rate}"
    return f"{count} · {rate} · about {clock_text(per_item * (total - done))} left"


def _singular(unit: str) -> str:
    """``batches`` → ``batch``, ``queries`` → ``query``, ``tasks`` → ``task``."""
    if unit.endswith("ies"):
        return unit[:-3] + "y"
    if unit.endswith(("ches", "shes", "sses", "xes")):
        return unit[:-2]
    return unit[:-1] if unit.endswith("s") else unit


def spinner(console: Any, clock: Clock = time.monotonic) -> Any:
    """A transient line (a spinner, its task's description, the time so far) for work whose
    count is one: a single judge call, a demo step."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        get_time=clock,
    )


@contextmanager
def progress(
    total: int,
    label: str,
    unit: str = "items",
    *,
    clock: Clock = time.monotonic,
    console: Any = None,
) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for runs of more than one item, as an ``on_progress``
    callback: the bar, then :func:`rate_line`. ``total`` is the expected count; the callback's
    own total (known once preflight has merged duplicates) replaces it. A single item, whose
    call may take minutes (local:qwen on a CPU), shows a spinner with the time so far instead
    (cleared after) and yields None."""
    from rich.progress import BarColumn, Progress, TextColumn

    if console is None:
        from evidex.cli._app import err_console as console
    if total <= 1:
        heartbeat = spinner(console, clock)
        heartbeat.add_task(f"{label}: waiting for the judge", total=None)
        with heartbeat:
            yield None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TextColumn("{task.fields[line]}"),
        console=console,
        get_time=clock,
    )
    started = clock()
    task = bar.add_task(label, total=total, line=rate_line(0, total, 0.0, unit))

    def update(done: int, of: int) -> None:
        line = rate_line(done, of, clock() - started, unit)
        bar.update(task, completed=done, total=of, line=line, refresh=True)

    with bar:
        yield update
