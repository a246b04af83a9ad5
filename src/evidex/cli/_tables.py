"""Printing a rich table so that it fits the terminal and never splits a word.

rich shrinks a table's columns to the terminal's width and folds the words that no longer fit
across lines ("kappa_lin" / "ear", "directly-suppo" / "rting") or cuts them ("termination-mir…").
:func:`print_table` prints the table only when every column can hold its longest word at this
width, with widths that keep them whole; otherwise it prints each row as a record, one
``header: value`` line per column, which the console wraps between words (the layout
``kubectl describe`` and ``git log`` use).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["print_table"]


def print_table(console: Console, table: Table) -> None:
    """``table`` on ``console``: as a table when its columns' longest words fit side by side
    at the console's width, else as records (see the module docstring)."""
    if _sized(console, table):
        console.print(table)
        return
    if table.title is not None:
        console.print(_text(table.title), style=table.title_style or "")
    headers = [_text(column.header).plain for column in table.columns]
    rows = zip(*(list(column.cells) for column in table.columns), strict=True)
    for number, row in enumerate(rows):
        if number:
            console.print()
        for header, cell in zip(headers, row, strict=True):
            line = Text.assemble((f"{header}: " if header else "", "bold"), _text(cell))
            console.print(line, overflow="fold")
    if table.caption is not None:
        console.print(_text(table.caption), style=table.caption_style or "")


def _sized(console: Console, table: Table) -> bool:
    """Give each wrapping column of ``table`` a width that holds its longest word, sharing
    what the console leaves in proportion to what each column could still use; False (and
    nothing changed) when the longest words do not fit side by side.

    rich's own layout shrinks the widest wrapping columns first, below their longest word
    even when the words would fit ("termination-mir…"), so the widths are set here from rich's
    measure of each column (a column that never wraps keeps its widest cell)."""
    options = console.options
    columns = table.columns
    measured = [table._measure_column(console, options, column) for column in columns]
    fixed = [column.no_wrap or column.width is not None for column in columns]
    low = [m.maximum if keep else m.minimum for m, keep in zip(measured, fixed, strict=True)]
    room = options.max_width - table._extra_width
    if sum(low) > room:
        return False
    want = [m.maximum - least for m, least in zip(measured, low, strict=True)]
    spare, wanted = room - sum(low), sum(want)
    for index, column in enumerate(columns):
        if fixed[index]:
            continue
        more = want[index] if wanted <= spare else want[index] * spare // wanted
        column.width = max(1, low[index] + more - table._get_padding_width(index))
    return True


def _text(value: Any) -> Text:
    """A cell, header or title as text (a renderable that is not text is shown as its
    string)."""
    if isinstance(value, Text):
        return value
    return Text.from_markup(value) if isinstance(value, str) else Text(str(value))
