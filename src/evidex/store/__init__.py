"""Storage: append-only audit log, content-addressed cache, review queue, golden labels, the
service's API keys and UI sessions, and pinned baseline runs."""

from evidex.store._decisions import AUDIT_STATUSES
from evidex.store._keys import ROLES, ApiKey, UiSession
from evidex.store._pins import BaselinePin
from evidex.store._review_decisions import visible_decisions
from evidex.store._reviews import DEFAULT_LEASE_S
from evidex.store._sql import SqlStore, default_url, open_store

__all__ = [
    "AUDIT_STATUSES",
    "DEFAULT_LEASE_S",
    "ROLES",
    "ApiKey",
    "BaselinePin",
    "SqlStore",
    "UiSession",
    "default_url",
    "open_store",
    "visible_decisions",
]
