"""The output file is the checkpoint: results appended one whole line at a time, and read back
on start to know which tasks are done.

Durability: each result line goes to the kernel in one ``os.write`` on an ``O_APPEND`` file
descriptor as soon as its task completes, so a killed process (``kill -9``, OOM) loses no
written line. ``fsync`` runs at most every ``sync_interval`` seconds and when the run ends:
an operating-system crash or power cut may lose the results of that last window (one second
by default); they are not in the file, so the next run does them again. A line cut short by
either is the *torn last line* that :func:`scan_output` truncates away.

An exclusive ``flock`` on the output keeps a second run from appending to the same file at
the same time (the lock goes with the process, also on ``kill -9``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidex.bulk.tasks import TaskId
from evidex.errors import ConfigError, InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["AppendLog", "Scanned", "scan_output"]


@dataclass
class Scanned:
    """What the output already holds: the ids of its results, and what was repaired."""

    done: set[TaskId] = field(default_factory=set)
    lines: int = 0
    truncated_bytes: int = 0
    """Bytes of a torn last line cut away (0: the file was whole)."""


def scan_output(path: Path) -> Scanned:
    """The ids already in ``path`` (missing file: none). A torn last line, one without its
    newline or not a JSON object with an ``id``, is truncated away; such a line anywhere
    else means the file is not this run's output, and nothing is touched."""
    scanned = Scanned()
    if not path.exists():
        return scanned
    good = 0
    with open(path, "r+b") as f:
        for number, raw in enumerate(f, 1):
            ident = _result_id(raw) if raw.endswith(b"\n") else None
            if ident is None:
                if raw.strip() == b"" and raw.endswith(b"\n"):
                    good += len(raw)
                    continue
                if f.read(1):
                    raise InputError(
                        f"line {number} is not a result line (a JSON object with an 'id'); "
                        "is this the output of an evidex bulk run? Not resuming over it",
                        where=str(path),
                    )
                break
            scanned.done.add(ident)
            scanned.lines += 1
            good += len(raw)
        size = f.seek(0, os.SEEK_END)
        if good < size:
            f.truncate(good)
            f.flush()
            os.fsync(f.fileno())
            scanned.truncated_bytes = size - good
    return scanned


def _result_id(raw: bytes) -> TaskId | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    ident = data.get("id")
    if isinstance(ident, bool) or not isinstance(ident, (str, int)):
        return None
    return ident


class AppendLog:
    """A JSONL file written one whole line per ``os.write``, fsynced every ``sync_interval``
    seconds and on :meth:`close`; see the module docstring. ``lock``: take the exclusive
    lock (the output; the errors file goes with it). ``lazy``: create the file on the first
    line only."""

    def __init__(
        self, path: Path, *, sync_interval: float = 1.0, lock: bool = False, lazy: bool = False
    ) -> None:
        self.path = path
        self.sync_interval = sync_interval
        self.lines = 0
        self._fd: int | None = None
        self._lock = lock
        self._synced = time.monotonic()
        if not lazy:
            self._open()

    def _open(self) -> int:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise ConfigError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        if self._lock and fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                raise ConfigError(
                    f"another run is writing {self.path} (it holds the file's lock)"
                ) from exc
        self._fd = fd
        return fd

    def write(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        fd = self._fd if self._fd is not None else self._open()
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        self.lines += 1
        if time.monotonic() - self._synced >= self.sync_interval:
            self.sync()

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
        self._synced = time.monotonic()

    def close(self) -> None:
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None
