"""MkDocs hook: a page per job (``jobs/<job>.md``) and the jobs' overview, made from the job
registry (:func:`evidex.jobs.definitions`) when the site is built.

The input, options, result and review-payload tables are read from each definition's models
(:mod:`site_tables`); the worked example is the job's Quickstart section of the README
(``<!-- --8<-- [start:job-NAME] -->``), which ``tests/test_readme.py`` runs. A job registered
tomorrow gets its page and its nav entry without an edit here, and a README without its
example fails the build.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from site_tables import cell, fields_table, fill_nav, options_table, paragraphs, prose

JOBS_DIR = "jobs"


def _calls(module: Any) -> list[str]:
    """The library calls a job module exports (its public functions)."""
    names = getattr(module, "__all__", ())
    return [n for n in names if inspect.isfunction(getattr(module, n, None))]


def _default_judges() -> dict[str, str]:
    from evidex.config import Settings

    return dict(Settings().judges)


def jobs_index() -> str:
    """The overview: one row per registered job, in registry order."""
    from evidex.harness.job import JobResult
    from evidex.jobs import ReviewPayload, definitions

    judges = _default_judges()
    lines = [
        "# Jobs",
        "",
        "Every job is one definition in the job registry (`evidex.jobs.definitions()`): its",
        "options, input, result and review payload are declared once, and the library call,",
        "`evidex JOB`, `evidex bulk JOB`, `POST /JOB` and the review UI are made from them. The",
        "pages below are generated from that registry when the site is built.",
        "",
        "| job | what it does | default judge | command | endpoint |",
        "|---|---|---|---|---|",
    ]
    for d in definitions():
        lines.append(
            f"| [{d.name}]({d.name}.md) | {cell(d.summary)} | `{judges.get(d.name, '')}` "
            f"| `evidex {d.name}` | `POST /{d.name}` |"
        )
    lines += [
        "",
        "Every call also takes the run keywords that every job shares (`judge=`, `store=`,",
        "`settings=`, `hooks=`, `on_progress=`, `prompt=`); see [the harness](../harness.md).",
        "",
        "## What every result carries",
        "",
        f"Each job's result adds its own fields to these (`JobResult`): {prose(JobResult.__doc__)}",
        "",
        fields_table(JobResult),
        "",
        "## What every review item holds",
        "",
        f"Each job's review payload adds its own fields to these (`ReviewPayload`): "
        f"{prose(ReviewPayload.__doc__)}",
        "",
        fields_table(ReviewPayload),
        "",
        "## The whole chain",
        "",
        '--8<-- "README.md:chain"',
        "",
    ]
    return "\n".join(lines)


def _module_doc(cls: type) -> str | None:
    return importlib.import_module(cls.__module__).__doc__


def job_page(name: str) -> str:
    """The page of job ``name``: what it is, how to call it, its input, options, result and
    review payload, and a worked example."""
    from evidex.harness.job import JobResult
    from evidex.jobs import ReviewPayload, definition, job_names

    d = definition(name)
    module = _defining_module(d)
    judge = _default_judges().get(name, "")
    calls = ", ".join(f"`{c}`" for c in _calls(module))
    endpoints = [f"`POST /{name}`", *(f"`POST /{name}/{view}`" for view in d.views)]
    out = [
        f"# {name}",
        "",
        prose(d.summary),
        "",
        *(p + "\n" for p in paragraphs(module.__doc__)[1:]),
        "| where | how |",
        "|---|---|",
        f"| library | {calls} in [`{module.__name__}`](../reference/{module.__name__}.md) |",
        f"| command line | `evidex {name}`, `evidex bulk {name}` |",
        f"| HTTP | {', '.join(endpoints)} |",
        f"| default judge | `{judge}` |",
    ]
    if d.evaluation is not None:
        measures = ", ".join(f"`{m}`" for m in d.evaluation.measures)
        out.append(f"| evaluation | `evidex eval {name}`: {measures} |")
    out += [
        "",
        "## Input",
        "",
        f"One item of the job (`{d.input.__name__}`): a request's body, a bulk line, an item of "
        f"the batch form. {prose(d.input.__doc__)}",
        "",
        fields_table(d.input),
        "",
        "## Options",
        "",
        f"`{d.options.__name__}`: the same names are the library call's keywords, the fields "
        "of a request and the flags of `evidex "
        f"{name}` and `evidex bulk {name}`; a bad value is refused before any judge is loaded.",
        "",
        options_table(d.options, name),
        "",
    ]
    if d.extras is not None:
        out += [
            "Options of the response only (the command and the endpoint; they never change "
            f"the judgment), `{d.extras.__name__}`: {prose(d.extras.__doc__)}",
            "",
            options_table(d.extras, name),
            "",
        ]
    out += [
        "## Result",
        "",
        f"`{d.result.__name__}`: {prose(d.result.__doc__)} Besides the provenance of "
        "[every result](index.md#what-every-result-carries):",
        "",
        fields_table(d.result, without=JobResult),
        "",
    ]
    if d.response_model is not d.result:
        response = d.response_model
        out += [
            f"`{response.__name__}`: {prose(response.__doc__)}",
            "",
            fields_table(response, without=JobResult),
            "",
        ]
    payload = d.review.payload
    out += [
        "## Review payload",
        "",
        *(p + "\n" for p in paragraphs(_module_doc(payload))),
        f"`{payload.__name__}`: {prose(payload.__doc__)} Besides what "
        "[every review item](index.md#what-every-review-item-holds) holds:",
        "",
        fields_table(payload, without=ReviewPayload),
        "",
        "## Worked example",
        "",
    ]
    first = job_names()[0]
    if name != first:
        out += [
            "The README's examples build on each other: `passages` is the list of the "
            f"[{first} example]({first}.md#worked-example).",
            "",
        ]
    out += [f'--8<-- "README.md:job-{name}"', ""]
    return "\n".join(out)


def _defining_module(job: Any) -> Any:
    """The module whose ``DEFINITION`` is ``job`` (the registry has imported it)."""
    return next(m for m in list(sys.modules.values()) if getattr(m, "DEFINITION", None) is job)


def on_config(config: Any) -> Any:
    """The Jobs section of the nav: the overview, then a page per registered job."""
    from evidex.jobs import job_names

    fill_nav(config, f"{JOBS_DIR}/index.md", [{j: f"{JOBS_DIR}/{j}.md"} for j in job_names()])
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    from evidex.jobs import job_names

    files.append(File.generated(config, f"{JOBS_DIR}/index.md", content=jobs_index()))
    for name in job_names():
        files.append(File.generated(config, f"{JOBS_DIR}/{name}.md", content=job_page(name)))
    return files
