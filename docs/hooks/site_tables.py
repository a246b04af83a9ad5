"""The tables of the generated pages, read from pydantic models: each field's name, type,
default, bounds and help (its ``description``, else the string under it in the class body),
and for a job's options the flag ``evidex JOB`` gives it. Shared by the site's hooks; not a
hook itself.
"""

from __future__ import annotations

import ast
import enum
import inspect
import itertools
import re
import textwrap
import typing
from collections.abc import Iterator
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo


def prose(text: str | None) -> str:
    """A docstring as one line of Markdown (double backquotes are already code there; Sphinx
    roles are dropped from the page by :func:`on_page_content`)."""
    if not text:
        return ""
    joined = re.sub(r"(\w)\.\n(\w)", r"\1.\2", inspect.cleandoc(text))  # a name cut at a dot
    return joined.replace("\n", " ").strip()


def paragraphs(text: str | None) -> list[str]:
    """A docstring's paragraphs, each as one Markdown line."""
    if not text:
        return []
    return [prose(p) for p in inspect.cleandoc(text).split("\n\n") if p.strip()]


def type_name(annotation: Any) -> str:
    """A field's type as a reader reads it: class names without their modules, an enum or a
    ``Literal`` as its values."""
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(repr(m.value) for m in annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(v) for v in typing.get_args(annotation))
    if origin is typing.Annotated:
        return type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = typing.get_args(annotation)
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b(?:[a-z_]\w*\.)+(?=[A-Za-z_])", "", str(annotation))


def bounds(info: FieldInfo) -> str:
    """The field's bounds as ``≥ 5, ≤ 15``; empty when it has none."""
    said = []
    for m in info.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(m, attr, None)
            if isinstance(m, annotated_types.BaseMetadata) and value is not None:
                said.append(f"{sign} {value}")
        if isinstance(m, annotated_types.MinLen) and m.min_length:
            said.append(f"at least {m.min_length} long")
        if isinstance(m, annotated_types.MaxLen):
            said.append(f"at most {m.max_length} long")
    return ", ".join(said)


def default_of(info: FieldInfo) -> str:
    """The field's default as it would be written, or *required*."""
    if info.is_required():
        return "*required*"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, BaseModel):
        return f"a default `{type(value).__name__}`"
    return f"`{value!r}`"


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """Attribute docstrings (a string literal under a field) of the model and its bases, the
    nearest class winning: pydantic reads them only when a model asks it to."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for first, second in itertools.pairwise(body):
            if (
                isinstance(first, ast.AnnAssign)
                and isinstance(first.target, ast.Name)
                and isinstance(second, ast.Expr)
                and isinstance(second.value, ast.Constant)
                and isinstance(second.value.value, str)
            ):
                docs[first.target.id] = second.value.value
    return docs


def cell(text: str) -> str:
    """Text for a table cell: ``|`` escaped outside code spans (inside them it is literal)."""
    parts = text.replace("\n", " ").split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def field_rows(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo, str]]:
    """``(name, field, help)`` for every field; a field whose Flag expands a nested model (the
    audit policy) is given as that model's fields, ``policy.threshold``."""
    from evidex.jobs import field_flag

    docs = attribute_docs(model)
    for name, info in model.model_fields.items():
        if field_flag(info).expand:
            nested = next(a for a in typing.get_args(info.annotation) if a is not type(None))
            yield from field_rows(nested, f"{prefix}{name}.")
            continue
        help_text = info.description or docs.get(name) or ""
        yield f"{prefix}{name}", info, prose(help_text)


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; a column empty in every row (bounds, most often) is left out."""
    keep = [i for i in range(len(header)) if i == 0 or any(r[i] for r in rows)]
    lines = ["| " + " | ".join(header[i] for i in keep) + " |", "|" + "---|" * len(keep)]
    lines += ["| " + " | ".join(cell(r[i]) for i in keep) + " |" for r in rows]
    return "\n".join(lines)


def fields_table(model: type[BaseModel], without: type[BaseModel] | None = None) -> str:
    """A model's fields: name, type, default, bounds and help; ``without``: a base model whose
    fields are documented once elsewhere (the provenance every result carries)."""
    from evidex.jobs import field_wire

    skip = set(without.model_fields) if without is not None else set()
    rows = [
        [_code(name), _code(type_name(field_wire(info))), default_of(info), bounds(info), text]
        for name, info, text in field_rows(model)
        if name not in skip
    ]
    return _table(["field", "type", "default", "bounds", "what it is"], rows)


def options_table(model: type[BaseModel], owner: str) -> str:
    """A job's options: its fields with the flag ``evidex JOB`` takes for each (the flags are
    read from the function that builds the command, so they are the command's own)."""
    from evidex.cli._derive import cli_options

    flags = {".".join(o.path): o.flag for o in cli_options(model, owner=owner)}
    rows = [
        [
            _code(name),
            _code(flags.get(name, "")),
            _code(type_name(info.annotation)),
            default_of(info),
            bounds(info),
            text,
        ]
        for name, info, text in field_rows(model)
    ]
    return _table(["option", "command line", "type", "default", "bounds", "what it does"], rows)


def fill_nav(config: Any, index: str, entries: list[Any]) -> None:
    """Puts ``entries`` after the section page ``index`` wherever the nav names it alone
    (``- Jobs: jobs/index.md`` becomes the section with a page per job)."""
    for entry in config.nav or []:
        if isinstance(entry, dict):
            for title, value in entry.items():
                if value == index:
                    entry[title] = [index, *entries]
