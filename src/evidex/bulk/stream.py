"""The input as a stream of tasks: read one line at a time, never loaded whole.

:class:`TaskFeed` yields, for each non-blank line, either the line's object to run or an
error line (not JSON, not UTF-8, no usable id, a repeated id). Tasks whose id is already in
the output are skipped and counted. The only state that grows with the input is the set of
ids seen (to find a repeated id, the second one is reported), about 100 bytes per task.
Any engine can drive it: the local engine pulls from it as tasks complete.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidex.bulk.tasks import TaskId, error_line, parse_line, task_id
from evidex.errors import InputError

__all__ = ["FeedItem", "TaskFeed", "count_lines", "open_input"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class FeedItem:
    """One line to run (``data``) or one error line (``error``)."""

    line: int
    data: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def open_input(path: Path) -> Path:
    """``path`` if it is a readable file; else a usage error naming it."""
    if str(path) == "-":
        raise InputError("bulk reads a file, not stdin: a resumed run reads it again")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except FileNotFoundError as exc:
        raise InputError("no such file", where=str(path)) from exc
    except IsADirectoryError as exc:
        raise InputError("is a directory, not a JSONL file", where=str(path)) from exc
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", where=str(path)) from exc
    return path


def count_lines(path: Path) -> int:
    """The number of lines of a file, counted in 1 MiB chunks (for the progress bar)."""
    count = 0
    last = b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


class TaskFeed:
    """The tasks of one input file for one run; see the module docstring. ``done``: ids
    already in the output (consumed: each is moved to the seen set when its line is read)."""

    def __init__(self, path: Path, done: set[TaskId]) -> None:
        self.path = path
        self.done = done
        self.seen: set[TaskId] = set()
        self.skipped = 0
        self.lines = 0

    def __iter__(self) -> Iterator[FeedItem]:
        with open(self.path, "rb") as f:
            for number, raw in enumerate(f, 1):
                self.lines = number
                item = self._item(number, raw)
                if item is not None:
                    yield item

    def _item(self, number: int, raw: bytes) -> FeedItem | None:
        if number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        if not raw.strip():
            return None
        ident: TaskId | None = None
        try:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 text (byte {exc.start})") from exc
            data = parse_line(text)
            ident = task_id(data)
        except InputError as exc:
            return FeedItem(number, error=error_line(number, ident, "invalid", str(exc)))
        if ident in self.seen:
            message = f"id {json.dumps(ident)} already appeared earlier in the input; not run"
            return FeedItem(number, error=error_line(number, ident, "duplicate", message))
        self.seen.add(ident)
        if ident in self.done:
            self.done.discard(ident)
            self.skipped += 1
            return None
        return FeedItem(number, data=data)
