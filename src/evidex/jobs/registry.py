"""The registry of jobs: every surface asks it which jobs there are and what each one is.

A job registers with one line in :data:`_MODULES` (its name and the module that defines its
``DEFINITION``); the CLI, bulk runs, the service, the review UI and the evaluators are built
from what it returns, so none of them names a job. Modules are imported when first asked for,
so listing the job names costs no import.
"""

from __future__ import annotations

import importlib
from typing import Any

from evidex.errors import ConfigError
from evidex.jobs._definition import JobDefinition

__all__ = ["definition", "definitions", "job_names"]

_MODULES: dict[str, str] = {
    "tier": "evidex.jobs.tier",
    "rerank": "evidex.jobs.rerank",
    "classify": "evidex.jobs.classify",
    "audit": "evidex.jobs.audit",
}


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
