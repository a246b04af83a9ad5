"""The four jobs as the library calls them: tier, rerank, classify, audit.

Other packages (cli, evaluate, service) import what they share from here, never from the private
modules of this package.
"""

from evidex.jobs._audit_policy import AuditDecision, AuditPolicy
from evidex.jobs._common import resolve_judge, resolve_store, run_sync, sync_of

__all__ = [
    "AuditDecision",
    "AuditPolicy",
    "resolve_judge",
    "resolve_store",
    "run_sync",
    "sync_of",
]
