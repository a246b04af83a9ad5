"""Pinned baseline runs: per job, the evaluation report the review UI's agreement page compares
the newest run with.

The store keeps the report itself, not a path to it: a report folder written again by the next
``evidex eval -o`` into the same place must not move the baseline under the team, and every
replica sharing the database sees the same pin. Pinning replaces a job's current pin and
clearing ends it; neither deletes a row: each pin keeps who made it and when, and who replaced
or cleared it and when (the service writes no other record of an admin's actions). A partial
unique index keeps one current pin per job, so two admins pinning at once cannot leave two.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from evidex.errors import ReviewConflict, StoreError
from evidex.store import _schema as t
from evidex.store._util import aware, now

__all__ = ["BaselinePin", "BaselinePins"]


@dataclass(frozen=True)
class BaselinePin:
    """One pin: the report (``report.json`` as ``evidex eval`` wrote it), where it was read
    from (``name``), its digest, and who pinned it when; ``ended`` is ``replaced`` or
    ``cleared`` for a pin that is no longer current."""

    id: int
    job: str
    name: str
    digest: str
    report: dict[str, Any]
    pinned_by: str
    pinned_at: datetime
    ended: str | None = None
    ended_by: str | None = None
    ended_at: datetime | None = None


def _pin_of(row: dict[str, Any]) -> BaselinePin:
    return BaselinePin(
        id=int(row["id"]),
        job=str(row["job"]),
        name=str(row["name"]),
        digest=str(row["digest"]),
        report=dict(row["report"]),
        pinned_by=str(row["pinned_by"]),
        pinned_at=aware(row["pinned_at"]) or now(),
        ended=row["ended"],
        ended_by=row["ended_by"],
        ended_at=aware(row["ended_at"]),
    )


class BaselinePins:
    """Baseline pin methods of :class:`~evidex.store.SqlStore`."""

    engine: sa.Engine
    _lock: threading.RLock

    def _read(self, query: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def pin_baseline(
        self, job: str, report: dict[str, Any], *, name: str, digest: str, by: str
    ) -> BaselinePin:
        """Pin ``report`` as ``job``'s baseline, ending the current pin (``replaced``) in the
        same transaction. A pin made by someone else at the same moment raises
        :class:`~evidex.errors.ReviewConflict`; nothing is written then."""
        p = t.baseline_pins
        at = now()
        try:
            with self._lock, self.engine.begin() as conn:
                conn.execute(
                    p.update()
                    .where(p.c.job == job, p.c.ended_at.is_(None))
                    .values(ended="replaced", ended_by=by, ended_at=at)
                )
                conn.execute(
                    p.insert().values(
                        job=job,
                        name=name,
                        digest=digest,
                        report=report,
                        pinned_by=by,
                        pinned_at=at,
                    )
                )
        except IntegrityError:
            raise ReviewConflict(
                f"another baseline of {job} was pinned at the same moment; reload and pin again"
            ) from None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot pin the baseline: {exc}") from exc
        pinned = self.baseline(job)
        if pinned is None:  # pragma: no cover - cleared between the commit and the read
            raise ReviewConflict(f"the baseline of {job} was cleared as it was pinned")
        return pinned

    def clear_baseline(self, job: str, *, by: str) -> bool:
        """End ``job``'s current pin (``cleared``); False when it had none."""
        p = t.baseline_pins
        try:
            with self._lock, self.engine.begin() as conn:
                result = conn.execute(
                    p.update()
                    .where(p.c.job == job, p.c.ended_at.is_(None))
                    .values(ended="cleared", ended_by=by, ended_at=now())
                )
                return bool(result.rowcount)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot clear the baseline: {exc}") from exc

    def baseline(self, job: str) -> BaselinePin | None:
        """``job``'s current pin, if it has one."""
        return self.baselines().get(job)

    def baselines(self) -> dict[str, BaselinePin]:
        """Every job's current pin, by job."""
        p = t.baseline_pins
        rows = self._read(sa.select(p).where(p.c.ended_at.is_(None)).order_by(p.c.job))
        return {str(r["job"]): _pin_of(r) for r in rows}

    def baseline_history(self, job: str) -> list[BaselinePin]:
        """Every pin ``job`` has had, the newest first (the current one, if any, among them)."""
        p = t.baseline_pins
        rows = self._read(sa.select(p).where(p.c.job == job).order_by(p.c.id.desc()))
        return [_pin_of(r) for r in rows]
