"""The jobs as the library calls them, and the registry every surface reads them from.

Other packages (cli, evaluate, service, bulk) import what they share from here, never from the
private modules of this package: the registry (:func:`definition`, :func:`definitions`,
:func:`job_names`) and what a definition is made of (:class:`JobDefinition`,
:class:`JobOptions`, :class:`Flag`, :class:`Wire`, :class:`SpecContext`).
"""

from evidex.jobs._audit_policy import AuditDecision, AuditPolicy
from evidex.jobs._common import resolve_judge, resolve_store, run_sync, sync_of
from evidex.jobs._definition import (
    Flag,
    JobDefinition,
    JobOptions,
    SpecContext,
    Wire,
    field_flag,
    field_wire,
    validation_message,
)
from evidex.jobs.registry import definition, definitions, job_names

__all__ = [
    "AuditDecision",
    "AuditPolicy",
    "Flag",
    "JobDefinition",
    "JobOptions",
    "SpecContext",
    "Wire",
    "definition",
    "definitions",
    "field_flag",
    "field_wire",
    "job_names",
    "resolve_judge",
    "resolve_store",
    "run_sync",
    "sync_of",
    "validation_message",
]
