"""A job is one definition: every surface takes a job's options from its Options model.

These tests would have caught each drift that hand-written option lists let through
(``review_sample_rate`` missing from the CLI and bulk, ``segment_tokens`` and
``claims_per_batch`` from the CLI, ``window``, ``step`` and ``check_grounding`` from bulk
rerank, defaults copied as literals), and they keep new layers from naming a job.
"""

from __future__ import annotations

import enum
import re
import typing
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from pydantic import BaseModel

from evidex.cli import _register, app
from evidex.cli._derive import cli_options
from evidex.jobs import JobDefinition, definition, definitions, field_flag, job_names
from evidex.service.jobs import request_model

SRC = Path(__file__).resolve().parents[1] / "src" / "evidex"
JOBS = [d.name for d in definitions()]


def _leaves(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every option a user can set, nested options models expanded: path → default."""
    out: dict[tuple[str, ...], Any] = {}
    for name, info in model.model_fields.items():
        if field_flag(info).expand:
            nested = next(a for a in typing.get_args(info.annotation) if a is not type(None))
            out.update(_leaves(nested, (*prefix, name)))
        else:
            out[(*prefix, name)] = None if info.is_required() else info.get_default()
    return out


def _command(*path: str) -> click.Command:
    _register()
    group: Any = typer.main.get_command(app)
    for name in path:
        group = group.commands[name]
    return group  # type: ignore[no-any-return]


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _flags(command: click.Command) -> dict[str, click.Parameter]:
    return {opt: p for p in command.params for opt in p.opts}


@pytest.mark.parametrize("job", JOBS)
@pytest.mark.parametrize("surface", [(), ("bulk",)], ids=["cli", "bulk"])
def test_every_option_is_a_flag_with_the_models_default(job: str, surface: tuple[str, ...]) -> None:
    spec = definition(job)
    flags = _flags(_command(*surface, job))
    generated = {o.path: o.flag for o in cli_options(spec.options, owner=job)}
    for path, default in _leaves(spec.options).items():
        assert path in generated, f"{job}: option {'.'.join(path)} has no flag"
        param = flags.get(generated[path])
        assert param is not None, f"evidex {' '.join((*surface, job))} lacks {generated[path]}"
        if default is None:
            assert param.default in (None, ()), (job, path, param.default)
        elif isinstance(default, tuple):
            assert tuple(param.default or ()) == default
        else:
            assert _plain(param.default) == _plain(default), (job, path)


@pytest.mark.parametrize("job", JOBS)
def test_every_option_is_a_request_field_with_the_models_default(job: str) -> None:
    spec = definition(job)
    request = request_model(spec).model_fields
    for name, info in spec.options.model_fields.items():
        assert name in request, f"POST /{job} lacks {name}"
        assert request[name].is_required() == info.is_required()
        if not info.is_required():
            assert request[name].get_default() == info.get_default(), (job, name)
    for name in spec.input.model_fields:
        assert name in request, f"POST /{job} lacks the input field {name}"


@pytest.mark.parametrize("job", JOBS)
def test_the_bulk_line_format_names_every_input_field(job: str) -> None:
    from evidex.bulk.tasks import line_format

    spec = definition(job)
    shown = line_format(spec)
    for name, info in spec.input.model_fields.items():
        if name != "id":
            assert f'"{name}"{"" if info.is_required() else "?"}' in shown
    assert f"one task a line: {shown}" in " ".join((_command("bulk", job).help or "").split())


def test_the_library_keywords_are_the_options_models_fields() -> None:
    """The TypedDicts that type the library's keywords list what the Options model declares
    (classify's taxonomy is the call's own argument, ``labels`` in the model)."""
    from evidex.jobs.audit import AuditOptions
    from evidex.jobs.classify import ClassifyOptions
    from evidex.jobs.rerank import RerankOptions
    from evidex.jobs.tier import TierOptions

    typed = {
        "tier": TierOptions,
        "rerank": RerankOptions,
        "classify": ClassifyOptions,
        "audit": AuditOptions,
    }
    for job, keywords in typed.items():
        fields = set(definition(job).options.model_fields) - {"labels"}
        assert set(keywords.__annotations__) == fields, job


def test_a_misspelled_option_is_refused_naming_it() -> None:
    from evidex.errors import InputError

    with pytest.raises(InputError, match="batch_sise: extra inputs are not permitted"):
        definition("tier").parse_options({"batch_sise": 5})


def test_an_unknown_job_names_the_registered_ones() -> None:
    from evidex.errors import ConfigError

    with pytest.raises(ConfigError, match="choose one of tier, rerank, classify, audit"):
        definition("summarise")


def test_the_registry_lists_each_job_once_with_its_own_definition() -> None:
    assert job_names() == tuple(JOBS)
    assert all(isinstance(d, JobDefinition) for d in definitions())
    assert len(set(JOBS)) == len(JOBS)


# ---------------------------------------------------------------------------- no job named

_BRANCH = re.compile(r"""\bjob(?:_name)?\s*(?:==|!=)\s*["']|\.job\s*(?:==|!=)\s*["']""")

_NOT_YET: set[str] = set()
"""Layers that still branch on a job name; each leaves this list as it is derived from the
registry (none left: the review payloads, the UI, decisions, evaluators and adapters are)."""


def _branching_files() -> set[str]:
    found = set()
    for path in SRC.rglob("*"):
        if path.suffix not in (".py", ".html") or "jobs" in path.relative_to(SRC).parts[:1]:
            continue
        if _BRANCH.search(path.read_text(encoding="utf-8")):
            found.add(path.relative_to(SRC).as_posix())
    return found


def test_no_layer_outside_the_jobs_branches_on_a_job_name() -> None:
    found = _branching_files()
    new = found - _NOT_YET
    assert not new, f"these files branch on a job name; derive them from the registry: {new}"
    done = _NOT_YET - found
    assert not done, f"no longer branching, take them off the list: {done}"


# ---------------------------------------------------------------------------- a new job's command


@pytest.fixture
def fresh_app() -> typer.Typer:
    """An app with no job commands: each registered job gets the command made from its
    definition alone, as a job without a command module of its own does."""
    from evidex.cli._job_command import add_job_commands

    fresh = typer.Typer()

    @fresh.callback()
    def _root() -> None:  # a group, so that commands keep their names
        """Test app."""

    assert add_job_commands(fresh) == JOBS
    return fresh


def test_a_job_without_a_command_module_gets_one_from_its_definition(
    fresh_app: typer.Typer,
    tmp_path: Path,
    scripted: Any,
) -> None:
    import json

    from typer.testing import CliRunner

    from tests.scripted import tier_reply

    scripted(*[tier_reply] * 4)
    passages = tmp_path / "p.jsonl"
    passages.write_text(
        "\n".join(
            json.dumps({"passage_id": f"p{i}", "text": f"passage {i} text"}) for i in range(7)
        )
    )
    db = f"sqlite:///{tmp_path / 'e.db'}"
    runner = CliRunner()
    argv = ["tier", "-q", "q", "-p", str(passages), "-j", "scripted", "--db", db]
    one = runner.invoke(fresh_app, [*argv, "--batch-size", "5", "--review-sample-rate", "0.5"])
    assert one.exit_code == 0, one.output
    report = json.loads(one.stdout)
    assert [a["passage_id"] for a in report["classifications"]] == [f"p{i}" for i in range(7)]
    assert report["judge_calls"] == 2  # 7 passages at --batch-size 5
    batch = tmp_path / "b.jsonl"
    rows = [{"query": "q", "passages": [{"passage_id": "a", "text": "some text"}]}] * 2
    batch.write_text("\n".join(json.dumps(r) for r in rows))
    many = runner.invoke(fresh_app, ["tier", "--batch", str(batch), "-j", "scripted", "--db", db])
    assert many.exit_code == 0, many.output
    assert len(many.stdout.strip().splitlines()) == 2
    missing = runner.invoke(fresh_app, ["tier", "-p", str(passages), "-j", "scripted"])
    # outside evidex's own entry point the usage error is raised as it is (main maps it to 2)
    assert "--query is required" in str(missing.exception)
    help_text = runner.invoke(fresh_app, ["tier", "--help"]).stdout
    for flag in ("--query", "--passages", "--batch", "--batch-size", "--review-sample-rate"):
        assert flag in help_text
