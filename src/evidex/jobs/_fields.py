"""How a job's option or input field looks on each surface, kept in the field's metadata.

A :class:`Flag` says how a field is spelled on the command line where ``--field-name`` does
not say it; a :class:`Wire` gives its type in an HTTP request where the library accepts more
forms than JSON carries. Both sit in the field's ``Annotated`` metadata, beside the field they
describe, so the model stays the one place an option is declared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

__all__ = ["Flag", "Wire", "field_flag", "field_wire"]


@dataclass(frozen=True)
class Flag:
    """How a field is spelled on the command line, where ``--field-name`` does not say it.

    ``decls``: the flag and its short form (default: ``--`` and the field name with hyphens);
    ``metavar``: what the value is called in ``--help``; ``load``: the flag takes a file path
    and the field's value is ``load(path)`` (tier schemes, taxonomies, few-shot examples);
    ``help``: the command line's own wording, where the field's description speaks of the
    library; ``expand``: a nested options model whose own fields become flags (the audit
    policy's ``--threshold`` and ``--on-contradiction``).
    """

    decls: tuple[str, ...] = ()
    metavar: str | None = None
    load: Callable[[Path], Any] | None = None
    help: str | None = None
    expand: bool = False

    def __init__(
        self,
        *decls: str,
        metavar: str | None = None,
        load: Callable[[Path], Any] | None = None,
        help: str | None = None,
        expand: bool = False,
    ) -> None:
        object.__setattr__(self, "decls", decls)
        object.__setattr__(self, "metavar", metavar)
        object.__setattr__(self, "load", load)
        object.__setattr__(self, "help", help)
        object.__setattr__(self, "expand", expand)


@dataclass(frozen=True)
class Wire:
    """The type a field has in an HTTP request, where the library's own is wider than JSON
    (``passages`` as any passage form, read by :func:`~evidex.preflight.coerce_passages`)."""

    annotation: Any


def field_flag(info: FieldInfo) -> Flag:
    """The field's :class:`Flag`, or the plain one its name implies."""
    return next((m for m in info.metadata if isinstance(m, Flag)), Flag())


def field_wire(info: FieldInfo) -> Any:
    """The field's type in a request: its :class:`Wire` annotation, else its own."""
    wire = next((m for m in info.metadata if isinstance(m, Wire)), None)
    return info.annotation if wire is None else wire.annotation
