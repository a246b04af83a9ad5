"""Storage: append-only audit log, content-addressed cache, review queue, golden labels."""

from evidex.store._reviews import DEFAULT_LEASE_S
from evidex.store._sql import SqlStore, default_url, open_store

__all__ = ["DEFAULT_LEASE_S", "SqlStore", "default_url", "open_store"]
