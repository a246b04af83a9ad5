"""Decisions on review items: one reviewer or several per item, and the adjudication of a
disagreement.

- **An item needs ``decisions_required`` independent decisions** (1 unless the queue's
  settings say more, :mod:`evidex.review_policy`). Each is a row of ``review_decisions``
  (who, what, note, when); the item counts them in ``decisions_made``. A reviewer decides an
  item once.
- **Deciding is a conditional update of the item from pending** (allowed to the lease holder
  or when no lease holds, and to its assignee alone while it is assigned), in one transaction
  with the decision's row. The update takes the item's row lock (PostgreSQL) or the database's
  write lock (SQLite) first, so two reviewers deciding the same item at once are ordered and
  the second reads the first's decision: the item is never left short of a decision it has.
  Whoever may not decide gets :class:`~evidex.errors.ReviewConflict` and nothing is written.
  The decision is checked against the job's and the item's allowed values first
  (:mod:`evidex.store._decisions`).
- **With the last decision it needs, the item is done**: ``resolved`` with the first decision
  when every decision means the same (the job's review model says what a decision means:
  ``accept`` of a judge's tier is that tier), else ``disputed``. A disputed item waits for an
  adjudication (:meth:`ReviewDecisions.adjudicate_review`; the service and the UI allow it to
  the ``admin`` role), which resolves it with the adjudicator's decision.
- **Nobody sees another's decision on an open item before deciding it themselves**
  (:func:`visible_decisions`): the pages and the API show an item's decisions through it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from evidex.errors import InputError, ReviewConflict, StoreError
from evidex.store import _schema as t
from evidex.store._decisions import check_decision, same_meaning
from evidex.store._reviews import conflict, may_work
from evidex.store._util import aware, now

__all__ = ["ReviewDecisions", "visible_decisions"]

q = t.review_queue
d = t.review_decisions

MAX_NOTE_CHARS = 10_000


class _Refused(Exception):
    """Ends a decision's transaction (rolled back) with why it was refused ("": ask the item)."""


def visible_decisions(
    item: dict[str, Any], decisions: Sequence[dict[str, Any]], viewer: str | None
) -> list[dict[str, Any]]:
    """The decisions of ``item`` that ``viewer`` may see: every one once the item is no longer
    pending (resolved, or disputed and waiting for adjudication) or once ``viewer`` has decided
    it; none before, so no reviewer's decision leans on another's."""
    if item.get("status") != "pending":
        return list(decisions)
    if viewer and any(x["reviewer"] == viewer and x["kind"] == "review" for x in decisions):
        return list(decisions)
    return []


class ReviewDecisions:
    """The deciding part of :class:`~evidex.store.SqlStore` (which provides these)."""

    engine: sa.Engine
    _lock: threading.RLock

    def _read(self, query: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get_review(self, item_id: int) -> dict[str, Any]:
        raise NotImplementedError

    def decided_by(self, item: dict[str, Any], reviewer: str | None) -> bool:
        raise NotImplementedError

    # ------------------------------------------------------------------ decide

    def resolve_review(
        self, item_id: int, *, decision: str, reviewer: str | None = None, note: str | None = None
    ) -> dict[str, Any]:
        """Record ``reviewer``'s decision on a pending item: the decision must be one the item
        allows (else :class:`~evidex.errors.InputError`). An item that needs one decision is
        resolved by it; one that needs several is resolved by the last when all agree, else
        disputed. An item no longer pending, leased to or assigned to another reviewer, or
        decided by ``reviewer`` already, raises :class:`~evidex.errors.ReviewConflict` and
        nothing is written."""
        item = self.get_review(item_id)
        if item["status"] != "pending":
            raise ReviewConflict(conflict(item, reviewer))
        value = check_decision(str(item["job"]), item, decision)
        note = _note(note)
        name = (reviewer or "").strip()
        if int(item["decisions_required"]) > 1 and not name:
            raise InputError(
                f"review item {item_id} needs {item['decisions_required']} independent "
                "decisions: name the reviewer who decides"
            )
        at = now()
        lease_free = sa.or_(q.c.lease_holder.is_(None), q.c.lease_expires_at <= at)
        if name:
            lease_free = sa.or_(lease_free, q.c.lease_holder == name)
        may = sa.and_(lease_free, may_work(name or None))
        try:
            with self._lock, self.engine.begin() as conn:
                # first the item's row, conditionally: its lock orders deciders of one item
                taken = conn.execute(
                    q.update()
                    .where(q.c.id == item_id, q.c.status == "pending", may)
                    .values(lease_holder=None, lease_expires_at=None)
                ).rowcount
                if taken != 1:
                    raise _Refused("")
                earlier = _rows(conn, item_id, "review")
                if name and any(x["reviewer"] == name for x in earlier):
                    raise _Refused(f"{name} has decided review item {item_id} already")
                row = conn.execute(sa.select(q).where(q.c.id == item_id)).mappings().one()
                _record(conn, item_id, name, "review", value, note, at)
                made = [*earlier, {"reviewer": name, "decision": value, "note": note}]
                conn.execute(q.update().where(q.c.id == item_id).values(**_outcome(row, made, at)))
        except _Refused as refused:  # rolled back: nothing was written
            if str(refused):
                raise ReviewConflict(f"{refused}; nothing was written") from None
            item = self.get_review(item_id)
            decided = self.decided_by(item, name)
            raise ReviewConflict(conflict(item, name or None, decided=decided)) from None
        except IntegrityError as exc:  # the same reviewer twice, past the row lock
            raise ReviewConflict(
                f"{name} has decided review item {item_id} already; nothing was written"
            ) from exc
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot write the review queue: {exc}") from exc
        return self.get_review(item_id)

    def adjudicate_review(
        self, item_id: int, *, decision: str, reviewer: str, note: str | None = None
    ) -> dict[str, Any]:
        """Settle a disputed item (its reviewers disagree) with ``reviewer``'s decision, which
        resolves it. Who may adjudicate is the caller's rule (the service: the ``admin``
        role); an item that is not disputed raises :class:`~evidex.errors.ReviewConflict`."""
        item = self.get_review(item_id)
        name = reviewer.strip()
        if not name:
            raise InputError("an adjudication needs the adjudicator's name")
        if item["status"] != "disputed":
            state = (
                "pending: its decisions are not all in"
                if item["status"] == "pending"
                else (f"resolved ({item['decision']!r})")
            )
            raise ReviewConflict(
                f"review item {item_id} has no disagreement to settle; it is {state}; "
                "nothing was written"
            )
        value = check_decision(str(item["job"]), item, decision)
        note = _note(note)
        at = now()
        try:
            with self._lock, self.engine.begin() as conn:
                settled = conn.execute(
                    q.update()
                    .where(q.c.id == item_id, q.c.status == "disputed")
                    .values(
                        status="resolved",
                        decision=value,
                        reviewer=name,
                        note=note,
                        resolved_at=at,
                    )
                ).rowcount
                if settled != 1:
                    raise _Refused(f"review item {item_id} was settled meanwhile")
                _record(conn, item_id, name, "adjudication", value, note, at)
        except _Refused as refused:
            raise ReviewConflict(f"{refused}; nothing was written") from None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot write the review queue: {exc}") from exc
        return self.get_review(item_id)

    # ------------------------------------------------------------------ read

    def review_decisions(self, item_ids: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
        """Every decision on each item, in the order they were made (the reviewers' first,
        an adjudication last); items without any are absent. One query per 500 items."""
        wanted = sorted(set(item_ids))
        found: dict[int, list[dict[str, Any]]] = {}
        for start in range(0, len(wanted), 500):
            query = (
                sa.select(d)
                .where(d.c.item_id.in_(wanted[start : start + 500]))
                .order_by(d.c.item_id, d.c.id)
            )
            for row in self._read(query):
                row["decided_at"] = aware(row["decided_at"])
                found.setdefault(int(row["item_id"]), []).append(row)
        return found

    def decided_items(self, *, job: str | None = None, least: int = 2) -> list[dict[str, Any]]:
        """Items with at least ``least`` reviewers' decisions (resolved or disputed), each with
        its ``decisions`` (the reviewers' alone, in order): what agreement between reviewers
        is measured on."""
        query = sa.select(q).where(
            q.c.decisions_made >= least, q.c.status.in_(("resolved", "disputed"))
        )
        if job:
            query = query.where(q.c.job == job)
        items = self._read(query.order_by(q.c.id))
        every = self.review_decisions(int(i["id"]) for i in items)
        for item in items:
            item["decisions"] = [x for x in every.get(int(item["id"]), []) if x["kind"] == "review"]
        return items

    def open_items_decided_by(self, reviewer: str) -> set[int]:
        """The pending items ``reviewer`` has decided, that wait for others' decisions."""
        query = (
            sa.select(d.c.item_id)
            .join(q, q.c.id == d.c.item_id)
            .where(d.c.reviewer == reviewer, d.c.kind == "review", q.c.status == "pending")
        )
        return {int(r["item_id"]) for r in self._read(query)}

    def resolved_by_reviewer(self, since: datetime) -> dict[str, int]:
        """How many decisions each reviewer made at or after ``since`` (adjudications too: one
        grouped count); a decision recorded without a name counts under ``""``."""
        query = (
            sa.select(d.c.reviewer, sa.func.count().label("n"))
            .where(d.c.decided_at >= since)
            .group_by(d.c.reviewer)
        )
        return {str(r["reviewer"] or ""): int(r["n"]) for r in self._read(query)}


def _record(
    conn: sa.Connection,
    item_id: int,
    reviewer: str,
    kind: str,
    decision: str,
    note: str | None,
    at: datetime,
) -> None:
    """Write one decision's row, in the caller's transaction."""
    row = {"reviewer": reviewer, "kind": kind, "decision": decision, "note": note}
    conn.execute(d.insert().values(item_id=item_id, decided_at=at, **row))


def _rows(conn: sa.Connection, item_id: int, kind: str) -> list[dict[str, Any]]:
    query = sa.select(d).where(d.c.item_id == item_id, d.c.kind == kind).order_by(d.c.id)
    return [dict(r) for r in conn.execute(query).mappings()]


def _note(note: str | None) -> str | None:
    text = (note or "").strip()
    if len(text) > MAX_NOTE_CHARS:
        raise InputError(f"a note has at most {MAX_NOTE_CHARS} characters")
    return text or None


def _outcome(item: Any, made: list[dict[str, Any]], at: datetime) -> dict[str, Any]:
    """The item's new columns once ``made`` holds every decision so far (the new one last):
    still pending (the assignee who just decided is no longer assigned, so another reviewer
    may take it), resolved with the first decision when all agree, or disputed."""
    values: dict[str, Any] = {"decisions_made": len(made)}
    if len(made) < int(item["decisions_required"]):
        if item["assignee"] == made[-1]["reviewer"]:
            values["assignee"] = None
        return values
    decisions = [str(x["decision"]) for x in made]
    if len(made) > 1 and not same_meaning(str(item["job"]), dict(item), decisions):
        values["status"] = "disputed"
        return values
    names = [str(x["reviewer"]) for x in made if x["reviewer"]]
    notes = [x for x in made if x["note"]]
    if len(made) == 1:
        note = made[0]["note"]
    else:
        note = "; ".join(f"{x['reviewer']}: {x['note']}" for x in notes) or None
    values.update(
        status="resolved",
        decision=decisions[0],
        reviewer=", ".join(names)[:200] or None,
        note=note,
        resolved_at=at,
    )
    return values
