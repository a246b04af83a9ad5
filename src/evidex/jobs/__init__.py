"""The jobs as the library calls them, and the registry every surface reads them from.

Other packages (cli, evaluate, service, bulk) import what they share from here, never from the
private modules of this package: the registry (:func:`definition`, :func:`definitions`,
:func:`job_names`) and what a definition is made of (:class:`JobDefinition`,
:class:`JobOptions`, :class:`Flag`, :class:`Wire`, :class:`SpecContext`, :class:`Evaluation`,
:class:`Documents` with :class:`Keep` and :class:`Kept`, :class:`ReviewKind` with
:class:`ReviewPayload` and :class:`ExportContext`; :func:`review_kind` finds an item's;
:class:`DemoPart` with :class:`DemoInputs` and :class:`DemoCase`, a job's step in the demo).
"""

from evidex.jobs._audit_policy import AuditDecision, AuditPolicy
from evidex.jobs._common import (
    judge_defaults,
    judge_key,
    resolve_judge,
    resolve_store,
    run_sync,
    sync_of,
)
from evidex.jobs._definition import (
    Documents,
    Evaluation,
    Flag,
    JobDefinition,
    JobOptions,
    SpecContext,
    Wire,
    field_flag,
    field_wire,
    validation_message,
)
from evidex.jobs._demo import DemoCase, DemoInputs, DemoPart
from evidex.jobs._documents import Keep, Kept
from evidex.jobs._review import ExportContext, FlaggedStretch, ReviewKind, ReviewPayload
from evidex.jobs.registry import definition, definitions, job_names, review_kind

__all__ = [
    "AuditDecision",
    "AuditPolicy",
    "DemoCase",
    "DemoInputs",
    "DemoPart",
    "Documents",
    "Evaluation",
    "ExportContext",
    "Flag",
    "FlaggedStretch",
    "JobDefinition",
    "JobOptions",
    "Keep",
    "Kept",
    "ReviewKind",
    "ReviewPayload",
    "SpecContext",
    "Wire",
    "definition",
    "definitions",
    "field_flag",
    "field_wire",
    "job_names",
    "judge_defaults",
    "judge_key",
    "resolve_judge",
    "resolve_store",
    "review_kind",
    "run_sync",
    "sync_of",
    "validation_message",
]
