"""Tables of the store, and the numbered migrations that create them.

A migration is a small named function; ``schema_migrations`` records which ran. Never edit one
that has shipped: add the next. The first one creates the tables from their definitions below,
which also carry the columns added since; so a migration that adds a column adds it only where
it is missing (a fresh database has it from the first).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

metadata = sa.MetaData()

migrations_table = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
)

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("time", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("job", sa.String(32), nullable=False),
    sa.Column("step", sa.String(64), nullable=False, default=""),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("query_hash", sa.String(64), nullable=False, default=""),
    sa.Column("batch_id", sa.String(128), nullable=False, default=""),
    sa.Column("judge_id", sa.String(200), nullable=False, default=""),
    sa.Column("model_version", sa.String(200), nullable=False, default=""),
    sa.Column("prompt_version", sa.String(64), nullable=False, default=""),
    sa.Column("attempt", sa.Integer, nullable=False, default=0),
    sa.Column("temperature", sa.Float, nullable=True),
    sa.Column("raw_output", sa.Text, nullable=True),
    sa.Column("errors", sa.JSON, nullable=False),
    sa.Column("labels", sa.JSON, nullable=True),
    sa.Column("latency_ms", sa.Float, nullable=True),
    sa.Column("prompt_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("completion_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("cache_key", sa.String(64), nullable=False, default=""),
    sa.Column("detail", sa.JSON, nullable=False),
)

cache = sa.Table(
    "cache",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("job", sa.String(32), nullable=False),
    sa.Column("value", sa.JSON, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

review_queue = sa.Table(
    "review_queue",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job", sa.String(32), nullable=False, index=True),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("risk", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("batch_id", sa.String(128), nullable=False, default=""),
    sa.Column("passage_ids", sa.JSON, nullable=False),
    sa.Column("payload", sa.JSON, nullable=False),
    sa.Column("decision", sa.Text, nullable=True),
    sa.Column("note", sa.Text, nullable=True),
    sa.Column("reviewer", sa.String(200), nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
    # migration 3: leases (who works on an item, until when) and the key that makes enqueueing
    # idempotent (unique among pending items)
    sa.Column("lease_holder", sa.String(200), nullable=True),
    sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("dedup_key", sa.String(64), nullable=True),
    # migration 5: how many independent decisions the item needs and has, and who it is
    # assigned to (only they may claim or decide it while it is)
    sa.Column("decisions_required", sa.Integer, nullable=False, default=1, server_default="1"),
    sa.Column("decisions_made", sa.Integer, nullable=False, default=0, server_default="0"),
    sa.Column("assignee", sa.String(200), nullable=True),
)

review_decisions = sa.Table(
    "review_decisions",
    metadata,
    # every decision on a review item, one row each: a reviewer's (kind "review", at most one
    # per reviewer and item) or the adjudication of a disagreement (kind "adjudication")
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("item_id", sa.Integer, nullable=False, index=True),
    sa.Column("reviewer", sa.String(200), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("decision", sa.Text, nullable=False),
    sa.Column("note", sa.Text, nullable=True),
    sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.UniqueConstraint("item_id", "reviewer", "kind", name="review_decisions_once"),
)

golden_labels = sa.Table(
    "golden_labels",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job", sa.String(32), nullable=False, index=True),
    sa.Column("item", sa.JSON, nullable=False),
    sa.Column("label", sa.JSON, nullable=False),
    sa.Column("origin", sa.String(200), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    # the key's public id: the part of the key before its secret, shown in lists and logs
    sa.Column("key_id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("salt", sa.String(64), nullable=False),
    sa.Column("digest", sa.String(128), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
)

ui_sessions = sa.Table(
    "ui_sessions",
    metadata,
    # the sha-256 of the cookie's token: a leaked table does not log anyone in
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("key_id", sa.String(32), nullable=False, index=True),
    sa.Column("csrf", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)

baseline_pins = sa.Table(
    "baseline_pins",
    metadata,
    # every evaluation report pinned as a job's baseline run, one row each: the current pin of a
    # job has no ended_at; a replaced or cleared pin keeps its row, so who pinned what, and who
    # ended it when, stays on record
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job", sa.String(32), nullable=False, index=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("report", sa.JSON, nullable=False),
    sa.Column("pinned_by", sa.String(200), nullable=False),
    sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("ended", sa.String(16), nullable=True),
    sa.Column("ended_by", sa.String(200), nullable=True),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
)


def _m1_initial_tables(conn: Connection) -> None:
    for table in (audit_log, cache, review_queue, golden_labels):
        table.create(conn, checkfirst=True)


def _m2_audit_log_append_only(conn: Connection) -> None:
    """The audit log refuses UPDATE and DELETE in the database itself, not just in our API."""
    if conn.dialect.name == "sqlite":
        for op in ("UPDATE", "DELETE"):
            conn.exec_driver_sql(
                f"CREATE TRIGGER IF NOT EXISTS audit_log_no_{op.lower()} BEFORE {op} ON audit_log "
                "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
            )
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            "CREATE OR REPLACE FUNCTION evidex_audit_append_only() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$ LANGUAGE plpgsql"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION evidex_audit_append_only()"
        )


def _m3_review_leases_and_dedup(conn: Connection) -> None:
    """Claims lease an item to one reviewer; the same input and reason is one pending item."""
    present = {c["name"] for c in sa.inspect(conn).get_columns("review_queue")}
    for column in ("lease_holder", "lease_expires_at", "dedup_key"):
        if column not in present:
            kind = review_queue.c[column].type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE review_queue ADD COLUMN {column} {kind}")
    conn.exec_driver_sql(
        "CREATE UNIQUE INDEX IF NOT EXISTS review_queue_pending_dedup "
        "ON review_queue (dedup_key) WHERE status = 'pending'"
    )
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS review_queue_pending_lease "
        "ON review_queue (status, lease_expires_at)"
    )


def _m4_api_keys_and_sessions(conn: Connection) -> None:
    """Keys with roles for the service, and the review UI's login sessions."""
    for table in (api_keys, ui_sessions):
        table.create(conn, checkfirst=True)


def _m5_several_reviewers_and_assignment(conn: Connection) -> None:
    """An item may need several independent decisions (each a row of ``review_decisions``)
    and may be assigned to one reviewer. Resolved items keep their one decision as its row.
    An item whose reviewers disagree waits, ``disputed``, for adjudication: it is still open,
    so the index that keeps one open item per input and reason covers it too."""
    present = {c["name"] for c in sa.inspect(conn).get_columns("review_queue")}
    for column, default in (
        ("decisions_required", " NOT NULL DEFAULT 1"),
        ("decisions_made", " NOT NULL DEFAULT 0"),
        ("assignee", ""),
    ):
        if column not in present:
            kind = review_queue.c[column].type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE review_queue ADD COLUMN {column} {kind}{default}")
    review_decisions.create(conn, checkfirst=True)
    q, d = review_queue, review_decisions
    resolved = q.c.status == "resolved"
    conn.execute(
        d.insert().from_select(
            ["item_id", "reviewer", "kind", "decision", "note", "decided_at"],
            sa.select(
                q.c.id,
                sa.func.coalesce(q.c.reviewer, ""),
                sa.literal("review"),
                sa.func.coalesce(q.c.decision, ""),
                q.c.note,
                sa.func.coalesce(q.c.resolved_at, q.c.created_at),
            ).where(resolved),
        )
    )
    conn.execute(q.update().where(resolved).values(decisions_made=1))
    conn.exec_driver_sql("DROP INDEX IF EXISTS review_queue_pending_dedup")
    conn.exec_driver_sql(
        "CREATE UNIQUE INDEX IF NOT EXISTS review_queue_open_dedup "
        "ON review_queue (dedup_key) WHERE status IN ('pending', 'disputed')"
    )


def _m6_baseline_pins(conn: Connection) -> None:
    """A job's pinned baseline run (the agreement page compares the newest run with it): at
    most one current pin per job, which the database itself keeps."""
    baseline_pins.create(conn, checkfirst=True)
    conn.exec_driver_sql(
        "CREATE UNIQUE INDEX IF NOT EXISTS baseline_pins_current "
        "ON baseline_pins (job) WHERE ended_at IS NULL"
    )


MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "initial tables", _m1_initial_tables),
    (2, "audit log append-only", _m2_audit_log_append_only),
    (3, "review leases and idempotent enqueue", _m3_review_leases_and_dedup),
    (4, "api keys and ui sessions", _m4_api_keys_and_sessions),
    (5, "several reviewers per item, assignment", _m5_several_reviewers_and_assignment),
    (6, "baseline pins", _m6_baseline_pins),
]
