"""Command-line flags made from a job's Options model, so no command spells an option again.

:func:`job_flags` adds one flag per field of the job's Options model (and of its response
extras) to a command, and hands the command the validated model. Each flag takes its name,
type, default, bounds and help from the field; a :class:`~evidex.jobs._definition.Flag` in the
field's metadata gives the spelling where the name alone does not (``--top-k``/``-k``,
``--constraint``), a file the value is read from (``--tiers FILE``), or a nested model whose
own fields become flags (the audit policy's ``--threshold``). ``evidex JOB`` and ``evidex bulk
JOB`` use the same function, so their options cannot drift apart.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union

import annotated_types
import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from evidex.errors import ConfigError
from evidex.jobs import Flag, JobDefinition, field_flag

__all__ = ["CliOption", "cli_options", "job_flags"]

R = TypeVar("R")


@dataclass(frozen=True)
class CliOption:
    """One generated flag: where its value goes (``path``: the field, or a nested model's field
    under it), the typer parameter, and how the typed value is made from what typer parsed."""

    path: tuple[str, ...]
    param: inspect.Parameter
    convert: Callable[[Any], Any]

    @property
    def flag(self) -> str:
        """The flag's long name, as ``--help`` shows it."""
        option = typing.get_args(self.param.annotation)[1]
        # in Annotated form, typer takes the first declaration in the place of the default
        return str(option.default).split("/")[0]


def _optional(annotation: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, else ``(annotation, False)``."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def _bounds(info: FieldInfo) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            bounds["min"] = m.ge
        elif isinstance(m, annotated_types.Le):
            bounds["max"] = m.le
    return bounds


def _identity(value: Any) -> Any:
    return value


def _choices(name: str, values: tuple[Any, ...]) -> type[enum.Enum]:
    """An Enum for a ``Literal`` field (typer reads choices from enums)."""
    return enum.Enum(name, {str(v): v for v in values}, type=str)  # type: ignore[return-value]


def _one(
    path: tuple[str, ...], info: FieldInfo, owner: str
) -> tuple[Any, Any, Callable[[Any], Any], dict[str, Any]]:
    """The typer type, default, converter and extra option keywords of one field."""
    flag = field_flag(info)
    kind, _ = _optional(info.annotation)
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    extra: dict[str, Any] = {}
    if flag.load is not None:
        load = flag.load
        return Path, None, (lambda v: None if v is None else load(v)), {"dir_okay": False}
    origin = typing.get_origin(kind)
    if origin is Literal:
        choices = _choices(f"{owner}_{path[-1]}", typing.get_args(kind))
        shown = None if default is None else choices(default)
        return choices, shown, (lambda v: None if v is None else v.value), {"case_sensitive": False}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind, default, _identity, {"case_sensitive": False}
    if origin in (tuple, list) and typing.get_args(kind)[0] is str:
        return list[str], None, (lambda v: tuple(v) if v else default), extra
    if kind in (int, float, str, bool):
        return kind, default, _identity, _bounds(info)
    raise TypeError(f"{owner}.{'.'.join(path)}: no command-line form for {info.annotation!r}")


def cli_options(model: type[BaseModel], *, owner: str = "") -> list[CliOption]:
    """The flags of every field of ``model`` (expanded nested models included)."""
    owner = owner or model.__name__
    out: list[CliOption] = []
    for name, info in model.model_fields.items():
        flag = field_flag(info)
        if flag.expand:
            nested, _ = _optional(info.annotation)
            for option in cli_options(nested, owner=owner):
                out.append(
                    CliOption(
                        (name, *option.path),
                        option.param.replace(name=f"{name}__{option.param.name}"),
                        option.convert,
                    )
                )
            continue
        out.append(_option((name,), info, flag, owner))
    return out


def _option(path: tuple[str, ...], info: FieldInfo, flag: Flag, owner: str) -> CliOption:
    kind, default, convert, extra = _one(path, info, owner)
    long = "--" + path[-1].replace("_", "-")
    decls = list(flag.decls or (long,))
    if kind is bool and default is True:
        decls[0] = f"{decls[0]}/--no-{decls[0].removeprefix('--')}"
    help_text = flag.help or info.description or ""
    show_default = default is not None and kind is not list[str]
    option = typer.Option(
        *decls,
        metavar=flag.metavar,
        help=help_text,
        show_default=show_default,
        **extra,
    )
    annotation = kind if default is not None or info.is_required() else kind | None
    param_default = inspect.Parameter.empty if info.is_required() else default
    param = inspect.Parameter(
        "_".join(path),
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[annotation, option],
        default=param_default,
    )
    return CliOption(path, param, convert)


def _values(options: list[CliOption], given: dict[str, Any]) -> dict[str, Any]:
    """The model's input from the parsed flags: nested fields gathered under their parent."""
    values: dict[str, Any] = {}
    for option in options:
        value = option.convert(given.pop(option.param.name))
        target = values
        for part in option.path[:-1]:
            target = target.setdefault(part, {})
        if value is not None:
            target[option.path[-1]] = value
    return values


def _validated(model: type[BaseModel], options: list[CliOption], values: dict[str, Any]) -> Any:
    """The model, or a :class:`ConfigError` naming the flag of each bad value."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        flags = {option.path: option.flag for option in options}
        problems = []
        for error in exc.errors(include_url=False):
            message = error["msg"].removeprefix("Value error, ")
            where = tuple(str(p) for p in error["loc"])
            prefixes = (where[:n] for n in range(len(where), 0, -1))
            named = next((flags[p] for p in prefixes if p in flags), None)
            problems.append(f"{named}: {message[:1].lower()}{message[1:]}" if named else message)
        raise ConfigError("; ".join(problems)) from exc


def job_flags(job: JobDefinition[Any, Any, Any]) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Add the flags of ``job``'s options to a command, which declares ``options`` to get the
    validated Options model, and ``extras`` to get the response extras too (their flags are
    added only then)."""
    own = cli_options(job.options, owner=job.name)

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        signature = inspect.signature(command, eval_str=True)
        extras = "extras" in signature.parameters and job.extras is not None
        more = cli_options(job.extras, owner=job.name) if extras and job.extras else []
        kept = [p for p in signature.parameters.values() if p.name not in ("options", "extras")]

        @functools.wraps(command)
        def with_options(*args: Any, **kwargs: Any) -> R:
            options = _validated(job.options, own, _values(own, kwargs))
            if extras and job.extras is not None:
                kwargs["extras"] = _validated(job.extras, more, _values(more, kwargs))
            return command(*args, options=options, **kwargs)

        with_options.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=list(_ordered([*kept, *(o.param for o in own), *(o.param for o in more)]))
        )
        return with_options

    return decorate


def _ordered(params: list[inspect.Parameter]) -> Iterator[inspect.Parameter]:
    """Keyword-only parameters may come in any order; positional ones keep theirs first."""
    positional = [p for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    keyword = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    yield from positional
    yield from keyword
