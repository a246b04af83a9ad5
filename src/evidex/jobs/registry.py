"""The registry of jobs: every surface asks it which jobs there are and what each one is.

A job registers with one line in :mod:`evidex._registered` (its name, the module that
defines its ``DEFINITION``, and its default judge); the CLI, bulk runs, the service, the
review UI and the evaluators are built from what it returns, so none of them names a job.
Modules are imported when first asked for, so listing the job names costs no import.
"""

from __future__ import annotations

import importlib
from typing import Any

from evidex._registered import JOBS
from evidex.errors import ConfigError
from evidex.jobs._definition import JobDefinition
from evidex.jobs._review import GENERIC, ReviewKind

__all__ = ["definition", "definitions", "job_names", "review_kind"]

_MODULES: dict[str, str] = {name: registered.module for name, registered in JOBS.items()}


def job_names() -> tuple[str, ...]:
    """The registered jobs, in the order the CLI and the docs list them."""
    return tuple(_MODULES)


def definition(name: str) -> JobDefinition[Any, Any, Any]:
    """The definition of job ``name``; an unknown name is a :class:`ConfigError` listing the
    registered ones."""
    module = _MODULES.get(name)
    if module is None:
        raise ConfigError(f"unknown job {name!r}; choose one of {', '.join(_MODULES)}")
    found = importlib.import_module(module).DEFINITION
    if not isinstance(found, JobDefinition) or found.name != name:
        raise ConfigError(f"{module}.DEFINITION is not the definition of the {name} job")
    return found


def definitions() -> tuple[JobDefinition[Any, Any, Any], ...]:
    """Every registered job's definition, in registration order."""
    return tuple(definition(name) for name in _MODULES)


def review_kind(job: str) -> ReviewKind:
    """The review side of job ``job``; a name no definition registers (an item a caller wrote
    by hand) is reviewed with accept or reject."""
    try:
        return definition(job).review
    except ConfigError:
        return GENERIC
