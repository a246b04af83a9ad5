"""The review queue, safe for several reviewers and several processes at once.

- **Enqueueing is idempotent.** An item's ``dedup_key`` hashes what does not change between
  runs (job, reason, the query or input, the step, the passages' ids and texts); a unique
  index over the keys of *pending* items makes a retried request or a cache-served repeat
  return the pending item that is already there instead of adding a second one.
- **Claiming leases.** :meth:`ReviewQueue.claim_review` gives one reviewer the oldest pending
  item that nobody holds (or whose lease ran out), for ``lease_s`` seconds: the items assigned
  to them first, then the unassigned ones; never an item assigned to someone else, nor one
  they have decided already (an item that needs several decisions). PostgreSQL picks it with
  ``SELECT ... FOR UPDATE SKIP LOCKED``; SQLite with a conditional ``UPDATE`` whose row count
  says whether this process won.
- **Assignment.** An item may be assigned to one reviewer, by a rule of the settings when it
  is queued (:mod:`evidex.review_policy`) or by an admin (:meth:`ReviewQueue.assign_review`):
  while it is, only they may claim or decide it.
- **Deciding** (one reviewer or several, disagreements and their adjudication) is
  :mod:`evidex.store._review_decisions`.
- **One item per input and reason.** A further step of an input that already has its
  fallback item updates that item (:meth:`ReviewQueue.update_review`) instead of adding one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from evidex._text import sha256_hex, stable_json
from evidex.errors import InputError, ReviewConflict, StoreError
from evidex.harness.ports import ReviewRequest
from evidex.review_policy import ReviewSettings
from evidex.store import _schema as t
from evidex.store._util import aware, new_id, now

__all__ = ["DEFAULT_LEASE_S", "OPEN_STATUSES", "ReviewQueue", "review_key"]

DEFAULT_LEASE_S = 15 * 60.0
"""How long a claim holds an item when the caller does not say: long enough to read it."""

_KEY_FIELDS = ("query", "input", "question", "answer", "step", "label", "segment")
"""Payload fields that say what is reviewed; the rest (grades, attempts, raw outputs, the run's
sources) may differ between two runs over the same input."""

OPEN_STATUSES = ("pending", "disputed")
"""An item still waiting for people: for decisions, or (disputed) for an adjudication."""

q = t.review_queue
d = t.review_decisions


def review_key(request: ReviewRequest) -> str:
    """The dedup key of a request: the same input and reason give the same key in every run."""
    payload = request.payload
    passages = payload.get("passages")
    material = {
        "job": request.job,
        "reason": request.reason,
        "passage_ids": list(request.passage_ids),
        "passages": [
            [p.get("passage_id"), p.get("text")]
            for p in (passages if isinstance(passages, list) else [])
            if isinstance(p, dict)
        ],
        **{name: payload.get(name) for name in _KEY_FIELDS if name in payload},
    }
    return sha256_hex(stable_json(material))


_SUMMARY_FIELDS = (
    "id",
    "job",
    "status",
    "reason",
    "risk",
    "run_id",
    "batch_id",
    "passage_ids",
    "decision",
    "reviewer",
    "created_at",
    "resolved_at",
    "lease_holder",
    "lease_expires_at",
    "decisions_required",
    "decisions_made",
    "assignee",
)
"""The columns of a queue listing: all but the payload, the note and the dedup key."""

_NO_LEASE: dict[str, Any] = {"lease_holder": None, "lease_expires_at": None}
"""What ends a lease: released, resolved."""


class ReviewQueue:
    """The review-queue part of :class:`~evidex.store.SqlStore` (which provides these)."""

    engine: sa.Engine
    _lock: threading.RLock
    _review_settings: ReviewSettings | None

    @property
    def review_settings(self) -> ReviewSettings:
        """How many decisions a new item needs and who it is assigned to: given to the
        store, else the ``[review]`` settings (read once, when the first item is queued)."""
        if self._review_settings is None:
            from evidex.config import load_settings

            self._review_settings = load_settings().review
        return self._review_settings

    def settle_review_settings(self, settings: ReviewSettings) -> None:
        """Use ``settings`` unless the store was given its own: a long-running caller (the
        service) passes the settings it loaded at start, so a later edit of the config file
        neither costs nor breaks a request that queues an item."""
        if self._review_settings is None:
            self._review_settings = settings

    def _read(self, query: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _write(self, stmt: Any, rows: list[dict[str, Any]] | None = None) -> int:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ enqueue

    def add_review(self, request: ReviewRequest) -> int:
        """Add an item, or return the id of the pending item with the same input and reason."""
        values = request.model_dump(mode="json")
        key = review_key(request)
        route = self.review_settings.route(request.job, request.risk, request.reason)
        values.update(
            status="pending",
            created_at=now(),
            dedup_key=key,
            decisions_required=route.decisions,
            assignee=route.assignee,
        )
        pending = sa.select(q.c.id).where(q.c.dedup_key == key, q.c.status.in_(OPEN_STATUSES))
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    existing = conn.execute(pending).scalar()
                    if existing is not None:
                        return int(existing)
                    return new_id(conn.execute(q.insert().values(**values)))
            except IntegrityError as exc:
                # another process added the same item between our check and our insert: the
                # unique index kept it to one, and that one is the answer
                with self.engine.connect() as conn:
                    existing = conn.execute(pending).scalar()
                if existing is None:
                    raise StoreError(f"cannot write the review queue: {exc}") from exc
                return int(existing)
            except SQLAlchemyError as exc:
                raise StoreError(f"cannot write the review queue: {exc}") from exc

    def update_review(self, item_id: int, request: ReviewRequest) -> None:
        """Replace a pending item's passage ids and payload: a further step of the same input
        fell back, or its job completed what the item holds (one item per input and reason).
        The dedup key stays the one the item was opened with, so a re-run of the same input
        still finds it; a resolved item is left as its reviewer saw it."""
        values = request.model_dump(mode="json", include={"passage_ids", "payload"})
        self._write(q.update().where(q.c.id == item_id, q.c.status == "pending").values(**values))

    # ------------------------------------------------------------------ read

    def list_reviews(
        self,
        *,
        status: str | None = "pending",
        job: str | None = None,
        assignee: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Items oldest first, of a status (None: every one), a job, an assignee ("": the
        unassigned ones), at most ``limit``."""
        query = _filtered(sa.select(q), status, job, assignee)
        return [_review_row(r) for r in self._read(query.limit(limit) if limit else query)]

    def review_summaries(
        self, *, status: str | None = "pending", job: str | None = None, assignee: str | None = None
    ) -> list[dict[str, Any]]:
        """Items without their payloads, oldest first: what a queue page filters and counts.
        A payload holds every passage in full, so thousands of items stay cheap only without
        it."""
        query = sa.select(*(q.c[name] for name in _SUMMARY_FIELDS))
        return [_review_row(r) for r in self._read(_filtered(query, status, job, assignee))]

    def run_provenance(self, run_ids: Iterable[str]) -> dict[str, dict[str, str]]:
        """Who judged each run: ``judge_id``, ``model_version`` and ``prompt_version`` of its
        last judged exchange in the audit log (a row that names a prompt version). A run that
        made no judged exchange (every answer cached) is absent. One grouped query per 500
        runs, over the log's ``run_id`` index."""
        a = t.audit_log
        wanted = sorted(set(run_ids))
        self.flush()
        found: dict[str, tuple[int, dict[str, str]]] = {}
        for start in range(0, len(wanted), 500):
            query = (
                sa.select(
                    a.c.run_id,
                    a.c.judge_id,
                    a.c.model_version,
                    a.c.prompt_version,
                    sa.func.max(a.c.id).label("last"),
                )
                .where(a.c.run_id.in_(wanted[start : start + 500]), a.c.prompt_version != "")
                .group_by(a.c.run_id, a.c.judge_id, a.c.model_version, a.c.prompt_version)
            )
            for row in self._read(query):
                last = int(row.pop("last"))
                run = str(row.pop("run_id"))
                if run not in found or found[run][0] < last:
                    found[run] = (last, {k: str(v or "") for k, v in row.items()})
        return {run: value for run, (_, value) in found.items()}

    def get_review(self, item_id: int) -> dict[str, Any]:
        rows = self._read(sa.select(q).where(q.c.id == item_id))
        if not rows:
            raise InputError(f"no review item with id {item_id}")
        return _review_row(rows[0])

    # ------------------------------------------------------------------ leases

    def claim_review(
        self, reviewer: str, *, job: str | None = None, lease_s: float = DEFAULT_LEASE_S
    ) -> dict[str, Any] | None:
        """Lease the oldest pending item nobody holds (or whose lease expired) to ``reviewer``
        for ``lease_s`` seconds, the items assigned to them before the unassigned ones; None
        when there is none. Two reviewers never get the same item while its lease holds; an
        item assigned to another, or one ``reviewer`` has decided already, is never theirs."""
        start, until = _lease(reviewer, lease_s)
        free = sa.and_(
            q.c.status == "pending",
            sa.or_(q.c.lease_holder.is_(None), q.c.lease_expires_at <= start),
            may_work(reviewer),
        )
        if job:
            free = sa.and_(free, q.c.job == job)
        order = (sa.case((q.c.assignee == reviewer, 0), else_=1), q.c.id)
        lease = {"lease_holder": reviewer, "lease_expires_at": until}
        try:
            if self.engine.dialect.name == "postgresql":
                claimed = self._claim_skip_locked(free, order, lease)
            else:
                claimed = self._claim_conditional(free, order, lease)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot claim a review item: {exc}") from exc
        return None if claimed is None else self.get_review(claimed)

    def _claim_skip_locked(
        self, free: Any, order: tuple[Any, ...], lease: dict[str, Any]
    ) -> int | None:
        with self.engine.begin() as conn:
            item_id = conn.execute(
                sa.select(q.c.id)
                .where(free)
                .order_by(*order)
                .limit(1)
                .with_for_update(of=q, skip_locked=True)
            ).scalar()
            if item_id is None:
                return None
            conn.execute(q.update().where(q.c.id == item_id).values(**lease))
            return int(item_id)

    def _claim_conditional(
        self, free: Any, order: tuple[Any, ...], lease: dict[str, Any]
    ) -> int | None:
        while True:
            candidates = [
                r["id"]
                for r in self._read(sa.select(q.c.id).where(free).order_by(*order).limit(20))
            ]
            if not candidates:
                return None
            for item_id in candidates:  # the update re-checks: another process may have won
                if self._write(q.update().where(q.c.id == item_id, free).values(**lease)) == 1:
                    return int(item_id)

    def claim_item(
        self, item_id: int, reviewer: str, *, lease_s: float = DEFAULT_LEASE_S
    ) -> dict[str, Any]:
        """Lease one chosen item to ``reviewer`` (or extend the lease they hold): a reviewer who
        opens an item to work on it. An item no longer pending, held by someone else whose
        lease has not run out, assigned to someone else, or decided by ``reviewer`` already,
        raises :class:`~evidex.errors.ReviewConflict`."""
        start, until = _lease(reviewer, lease_s)
        may = sa.and_(
            sa.or_(
                q.c.lease_holder.is_(None),
                q.c.lease_expires_at <= start,
                q.c.lease_holder == reviewer,
            ),
            may_work(reviewer),
        )
        written = self._write(
            q.update()
            .where(q.c.id == item_id, q.c.status == "pending", may)
            .values(lease_holder=reviewer, lease_expires_at=until)
        )
        item = self.get_review(item_id)
        if written != 1:
            raise ReviewConflict(conflict(item, reviewer, decided=self.decided_by(item, reviewer)))
        return item

    def decided_by(self, item: dict[str, Any], reviewer: str | None) -> bool:
        """Whether ``reviewer`` has decided ``item`` already (as one of its reviewers)."""
        if not reviewer or not item.get("decisions_made"):
            return False
        query = sa.select(d.c.id).where(
            d.c.item_id == item["id"], d.c.reviewer == reviewer, d.c.kind == "review"
        )
        return bool(self._read(query))

    def release_review(self, item_id: int, reviewer: str) -> dict[str, Any]:
        """Give a claimed item back to the queue before its lease runs out."""
        released = self._write(
            q.update()
            .where(q.c.id == item_id, q.c.status == "pending", q.c.lease_holder == reviewer)
            .values(**_NO_LEASE)
        )
        item = self.get_review(item_id)
        if not released:
            raise ReviewConflict(conflict(item, reviewer))
        return item

    # ------------------------------------------------------------------ assignment

    def assign_review(self, item_id: int, assignee: str | None) -> dict[str, Any]:
        """Assign an open item to ``assignee`` (None or "": to nobody). A lease someone else
        holds ends, since only the assignee may work on it now; an item ``assignee`` has
        decided already, or one no longer open, raises
        :class:`~evidex.errors.ReviewConflict`."""
        name = (assignee or "").strip() or None
        if name is not None and len(name) > 200:
            raise InputError("a reviewer's name has at most 200 characters")
        stmt = q.update().where(q.c.id == item_id, q.c.status.in_(OPEN_STATUSES))
        values: dict[str, Any] = {"assignee": name}
        if name is not None:
            stmt = stmt.where(_not_decided_by(name))
            values["lease_holder"] = sa.case((q.c.lease_holder == name, name), else_=None)
            values["lease_expires_at"] = sa.case(
                (q.c.lease_holder == name, q.c.lease_expires_at), else_=None
            )
        written = self._write(stmt.values(**values))
        item = self.get_review(item_id)
        if written != 1:
            if item["status"] not in OPEN_STATUSES:
                raise ReviewConflict(conflict(item, name))
            raise ReviewConflict(
                f"{name} has decided review item {item_id} already; assign it to someone who "
                "has not; nothing was written"
            )
        return item


def _lease(reviewer: str, lease_s: float) -> tuple[datetime, datetime]:
    """When a lease taken now by ``reviewer`` starts and ends; refuses a nameless reviewer and a
    lease outside (0 s, 7 days], which would either free the item at once or hide it for good."""
    if not reviewer.strip():
        raise InputError("a claim needs the reviewer's name")
    if not 0 < lease_s <= 7 * 24 * 3600:
        raise InputError("a lease lasts more than 0 seconds and at most 7 days")
    start = now()
    return start, start + timedelta(seconds=lease_s)


def _not_decided_by(reviewer: str) -> Any:
    """The item has no decision of ``reviewer`` (a reviewer decides an item once)."""
    return ~sa.exists().where(d.c.item_id == q.c.id, d.c.reviewer == reviewer, d.c.kind == "review")


def may_work(reviewer: str | None) -> Any:
    """Whether ``reviewer`` may claim or decide an item, leases aside: it is assigned to
    nobody or to them, and they have not decided it yet."""
    if not reviewer:
        return q.c.assignee.is_(None)
    return sa.and_(
        sa.or_(q.c.assignee.is_(None), q.c.assignee == reviewer),
        sa.or_(q.c.decisions_made == 0, _not_decided_by(reviewer)),
    )


def conflict(item: dict[str, Any], reviewer: str | None, *, decided: bool = False) -> str:
    """Why ``reviewer`` may not act on ``item`` now, ending with "nothing was written";
    ``decided``: whether they have decided it already."""
    if item["status"] == "disputed":
        return (
            f"review item {item['id']} awaits adjudication (its reviewers disagree); "
            "nothing was written"
        )
    if item["status"] != "pending":
        return (
            f"review item {item['id']} is already resolved ({item['decision']!r} by "
            f"{item['reviewer'] or 'an unnamed reviewer'}); nothing was written"
        )
    if decided:
        return (
            f"{reviewer} has decided review item {item['id']} already; it waits for another "
            "reviewer's decision; nothing was written"
        )
    holder, until = item.get("lease_holder"), item.get("lease_expires_at")
    if holder and holder != reviewer and until is not None and until > now():
        return (
            f"review item {item['id']} is claimed by {holder} until "
            f"{until.isoformat(timespec='seconds')}; nothing was written"
        )
    assignee = item.get("assignee")
    if assignee and assignee != reviewer:
        return (
            f"review item {item['id']} is assigned to {assignee}: only they may work on it "
            "while it is; nothing was written"
        )
    return f"review item {item['id']} is not claimed by {reviewer or 'you'}; nothing was written"


def _filtered(query: Any, status: str | None, job: str | None, assignee: str | None) -> Any:
    query = query.order_by(q.c.id)
    if status is not None:
        query = query.where(q.c.status == status)
    if job:
        query = query.where(q.c.job == job)
    if assignee is not None:
        query = query.where(q.c.assignee == assignee if assignee else q.c.assignee.is_(None))
    return query


def _review_row(row: dict[str, Any]) -> dict[str, Any]:
    for name in ("created_at", "resolved_at", "lease_expires_at"):
        row[name] = aware(row.get(name))
    return row
