"""``evidex JOB`` for a registered job that has no command module of its own.

The command is made from the definition alone: one flag per field of the job's Input model
(``--passages FILE.jsonl`` for its passages, ``--NAME TEXT`` for a text, repeatable for a
list of texts), ``--batch FILE.jsonl`` for many inputs (one Input object a line, one JSON
result a line out), the shared run flags and the job's options (:func:`job_flags`). So a job
added to the registry is on the command line with nothing written here; tier, rerank,
classify and audit keep their own modules for the input forms only they have (TREC runs,
answer files, consistency checks).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic.fields import FieldInfo

from evidex.cli._app import app, err_console, write_json, write_lines
from evidex.cli._commands import GENERATED, commands
from evidex.cli._derive import job_flags
from evidex.cli._io import RunFlags, json_line, jsonl_objects, progress, read_passages, run_flags
from evidex.cli._options import PromptOpt, batch_option, unset_option
from evidex.cli._spend import report_spend
from evidex.errors import ConfigError, InputError
from evidex.jobs import JobDefinition, definition, job_names

__all__ = ["add_job_commands"]

_KW = inspect.Parameter.KEYWORD_ONLY


PASSAGES = "passages"
"""The Input field read from a JSONL file of passages; every other field is text."""


def _input_param(name: str, info: FieldInfo) -> inspect.Parameter:
    help_text = info.description or name
    if name == PASSAGES:
        option = unset_option(
            "--passages",
            "-p",
            metavar="FILE.jsonl",
            help=f"{help_text} One JSON object a line; '-' reads stdin.",
        )
        return inspect.Parameter(name, _KW, annotation=Annotated[str | None, option], default=None)
    decls = [f"--{name.replace('_', '-')}"] + (["-q"] if name == "query" else [])
    kind = list[str] if typing.get_origin(info.annotation) is list else str
    option = unset_option(*decls, metavar="TEXT", help=help_text)
    return inspect.Parameter(name, _KW, annotation=Annotated[kind | None, option], default=None)


def _one_input(job: JobDefinition[Any, Any, Any], given: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, info in job.input.model_fields.items():
        value = given.get(name)
        if value is None:
            if info.is_required():
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"{flag} is required (or give --batch FILE.jsonl)")
            continue
        fields[name] = read_passages(value) if name == PASSAGES else value
    return fields


def _batch_inputs(job: JobDefinition[Any, Any, Any], path: Path) -> list[Any]:
    items = []
    for where, _, data in jsonl_objects(path):
        try:
            items.append(job.parse_input(data))
        except InputError as exc:
            raise InputError(str(exc), where=where) from exc
    return items


def _command(job: JobDefinition[Any, Any, Any]) -> Callable[..., None]:
    names = [n for n in job.input.model_fields if n != "id"]

    def command(**kwargs: Any) -> None:
        flags: RunFlags = kwargs.pop("flags")
        options = kwargs.pop("options")
        extras = kwargs.pop("extras", None)
        batch: Path | None = kwargs.pop("batch")
        prompt = kwargs.pop("prompt")
        given = {n: kwargs.pop(n) for n in names}
        if batch is not None:
            extra = [f"--{n.replace('_', '-')}" for n, v in given.items() if v is not None]
            if extra:
                raise ConfigError(
                    f"--batch reads every input from its file; drop {', '.join(extra)}"
                )
            items = _batch_inputs(job, batch)
        else:
            items = [job.parse_input(_one_input(job, given))]
        with flags.job(job.name) as run, progress(len(items), job.name) as on_progress:
            results = job.run_many(
                items, options=options, prompt=prompt, on_progress=on_progress, **run
            )
        if batch is None:
            write_json(job.respond(results[0], extras), flags.output)
        else:
            write_lines([json_line(job.respond(r, extras)) for r in results], flags.output)
        fell = sum(1 for r in results if job.fell_back(r))
        if fell:
            err_console.print(
                f'[yellow]warning:[/] {fell} result(s) are fallbacks (source "fallback", with '
                "a review item); see evidex review",
                highlight=False,
            )
        report_spend(results)

    params = [
        inspect.Parameter("flags", _KW, annotation=RunFlags),
        inspect.Parameter("options", _KW, annotation=job.options),
        *(_input_param(n, job.input.model_fields[n]) for n in names),
        inspect.Parameter(
            "batch",
            _KW,
            annotation=Annotated[
                Path | None,
                batch_option(
                    "Many inputs: one JSON object a line with "
                    + ", ".join(names)
                    + "; writes one JSON result a line."
                ),
            ],
            default=None,
        ),
        inspect.Parameter("prompt", _KW, annotation=PromptOpt, default=None),
    ]
    if job.extras is not None:
        params.insert(2, inspect.Parameter("extras", _KW, annotation=job.extras))
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = f"{job.name}_command"
    command.__doc__ = (
        f"{job.summary}\n\nPrints the result as JSON (with --batch, one JSON result a line). "
        'A result that could not be judged has source "fallback" and a review item; the exit '
        "code is still 0."
    )
    return run_flags()(job_flags(job)(command))


def add_job_commands(target: typer.Typer = app, only: Sequence[str] | None = None) -> list[str]:
    """Add ``evidex JOB`` for every registered job without a command (of ``only``, when
    given); the names added."""
    taken = {
        c.name or (c.callback.__name__ if c.callback else "") for c in target.registered_commands
    }
    added = []
    for name in job_names() if only is None else only:
        if name not in taken:
            target.command(name)(_command(definition(name)))
            added.append(name)
    return added


# the jobs the command table gives no module of their own get their command on import, as a
# command module registers its own
add_job_commands(only=[name for name, entry in commands().items() if entry.module == GENERATED])
