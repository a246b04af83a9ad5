"""API keys with roles, and the review UI's login sessions.

A key reads ``evx_<key_id>_<secret>``. The visible ``key_id`` finds the row, so one slow hash
checks a key (never one per stored key); the secret is stored only as a salted scrypt digest and
compared in constant time. A key is shown once, when it is made. Sessions store the sha-256 of
their cookie token (a fast hash is enough for 32 random bytes) and end when they expire, when
their reviewer logs out, or when their key is revoked.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from evidex.errors import InputError
from evidex.store import _schema as t
from evidex.store._util import aware, now

__all__ = ["ROLES", "ApiKey", "KeyRing", "UiSession"]

ROLES = ("client", "reviewer", "admin")
"""client: the job endpoints; reviewer: the review queue, the audit log and the UI; admin: keys
(and everything else)."""

KEY_PREFIX = "evx"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "maxmem": 64 * 1024 * 1024, "dklen": 32}
"""scrypt at n=2^14, r=8: about 16 MiB and tens of milliseconds per check, so a stolen table
cannot be searched quickly; a process hashes a token once (:meth:`KeyRing.verify_key`), so a
busy client does not pay that on every request."""
VERIFIED_TTL_S = 30.0
"""How long a process trusts a key it has checked without reading its row again; a revocation
reaches other processes within this time (at once in the process that revoked)."""


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    name: str
    role: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "name": self.name,
            "role": self.role,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }


@dataclass(frozen=True)
class UiSession:
    key: ApiKey
    csrf: str
    expires_at: datetime


def _digest(secret: str, salt: str) -> str:
    return hashlib.scrypt(secret.encode(), salt=bytes.fromhex(salt), **_SCRYPT).hex()


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _key_of(row: Any) -> ApiKey:
    return ApiKey(
        key_id=row["key_id"],
        name=row["name"],
        role=row["role"],
        created_at=aware(row["created_at"]) or now(),
        revoked_at=aware(row["revoked_at"]),
    )


class KeyRing:
    """Key and session methods of :class:`~evidex.store.SqlStore`."""

    engine: sa.Engine
    _verified_keys: dict[str, tuple[float, ApiKey]]
    """sha-256 of a checked token -> (when, key); plain dict operations, safe across threads."""

    def _read(self, query: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _write(self, stmt: Any, rows: list[dict[str, Any]] | None = None) -> int:
        raise NotImplementedError

    # ------------------------------------------------------------------ keys

    def create_key(self, role: str, name: str | None = None) -> tuple[ApiKey, str]:
        """Store a new key; returns it with its secret, which is never readable again."""
        if role not in ROLES:
            raise InputError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_hex(16)
        row = {
            "key_id": key_id,
            "name": (name or f"{role}-{key_id}")[:200],
            "role": role,
            "salt": salt,
            "digest": _digest(secret, salt),
            "created_at": now(),
            "revoked_at": None,
        }
        self._write(t.api_keys.insert(), [row])
        return _key_of(row), f"{KEY_PREFIX}_{key_id}_{secret}"

    def list_keys(self, include_revoked: bool = False) -> list[ApiKey]:
        query = sa.select(t.api_keys).order_by(t.api_keys.c.created_at)
        if not include_revoked:
            query = query.where(t.api_keys.c.revoked_at.is_(None))
        return [_key_of(row) for row in self._read(query)]

    def has_keys(self) -> bool:
        """Whether any key is active: a service with none is open to loopback callers only."""
        query = sa.select(t.api_keys.c.key_id).where(t.api_keys.c.revoked_at.is_(None)).limit(1)
        return bool(self._read(query))

    def revoke_key(self, key_id: str) -> ApiKey:
        """Revoke a key (its sessions end with it); revoking twice is an error that says so."""
        rows = self._read(sa.select(t.api_keys).where(t.api_keys.c.key_id == key_id))
        if not rows:
            raise InputError(f"no key with id {key_id!r} (see `evidex keys list`)")
        if rows[0]["revoked_at"] is not None:
            raise InputError(f"key {key_id!r} is already revoked")
        when = now()
        self._write(
            t.api_keys.update()
            .where(t.api_keys.c.key_id == key_id, t.api_keys.c.revoked_at.is_(None))
            .values(revoked_at=when)
        )
        self._write(t.ui_sessions.delete().where(t.ui_sessions.c.key_id == key_id))
        for token, (_, key) in list(self._verified_keys.items()):
            if key.key_id == key_id:
                self._verified_keys.pop(token, None)
        return _key_of({**rows[0], "revoked_at": when})

    def recently_verified(self, token: str) -> ApiKey | None:
        """The key ``token`` is, if this process checked it within :data:`VERIFIED_TTL_S`: no
        I/O and no slow hash, so a server may ask on its event loop before paying for either."""
        cached = self._verified_keys.get(_token_hash(token))
        if cached is not None and time.monotonic() - cached[0] < VERIFIED_TTL_S:
            return cached[1]
        return None

    def verify_key(self, token: str) -> ApiKey | None:
        """The active key ``token`` is, or None (malformed, unknown, wrong secret, revoked).

        The slow hash runs once per token and process: a token this process has matched
        before is only looked up again (is its key still active?) once its check is older
        than :data:`VERIFIED_TTL_S`, so a busy client costs one row read per TTL, not one
        scrypt."""
        hashed = _token_hash(token)
        cached = self._verified_keys.get(hashed)
        if cached is not None:
            if time.monotonic() - cached[0] < VERIFIED_TTL_S:
                return cached[1]
            rows = self._read(
                sa.select(t.api_keys).where(
                    t.api_keys.c.key_id == cached[1].key_id, t.api_keys.c.revoked_at.is_(None)
                )
            )
            if not rows:
                self._verified_keys.pop(hashed, None)
                return None
            key = _key_of(rows[0])
            self._verified_keys[hashed] = (time.monotonic(), key)
            return key
        prefix, _, rest = token.partition("_")
        key_id, _, secret = rest.partition("_")
        if prefix != KEY_PREFIX or not key_id or not secret or len(token) > 200:
            return None
        rows = self._read(
            sa.select(t.api_keys).where(
                t.api_keys.c.key_id == key_id, t.api_keys.c.revoked_at.is_(None)
            )
        )
        if not rows or not hmac.compare_digest(_digest(secret, rows[0]["salt"]), rows[0]["digest"]):
            return None
        key = _key_of(rows[0])
        self._verified_keys[hashed] = (time.monotonic(), key)
        return key

    # ------------------------------------------------------------------ UI sessions

    def open_session(self, key: ApiKey, ttl_s: float = 8 * 3600.0) -> tuple[str, UiSession]:
        """A login session for ``key``: returns the cookie's token and the session."""
        token = secrets.token_urlsafe(32)
        session = UiSession(
            key=key, csrf=secrets.token_urlsafe(24), expires_at=now() + timedelta(seconds=ttl_s)
        )
        self._write(
            t.ui_sessions.insert(),
            [
                {
                    "token_hash": _token_hash(token),
                    "key_id": key.key_id,
                    "csrf": session.csrf,
                    "created_at": now(),
                    "expires_at": session.expires_at,
                }
            ],
        )
        return token, session

    def session(self, token: str) -> UiSession | None:
        """The live session of a cookie token, or None (unknown, expired, or key revoked)."""
        s, k = t.ui_sessions, t.api_keys
        rows = self._read(
            sa.select(s.c.csrf, s.c.expires_at, k)
            .join(k, k.c.key_id == s.c.key_id)
            .where(s.c.token_hash == _token_hash(token), k.c.revoked_at.is_(None))
        )
        if not rows:
            return None
        expires = aware(rows[0]["expires_at"])
        if expires is None or expires <= now():
            return None
        return UiSession(key=_key_of(rows[0]), csrf=rows[0]["csrf"], expires_at=expires)

    def close_session(self, token: str) -> None:
        self._write(t.ui_sessions.delete().where(t.ui_sessions.c.token_hash == _token_hash(token)))
