"""Who may call what: API keys with roles, sent as ``Authorization: Bearer KEY``.

- ``client`` calls the job endpoints (grades, decisions and reasons; never raw judge output);
  ``reviewer`` reads and works the review queue, the audit log and the UI; ``admin`` manages
  keys and may do everything else.
- No usable key: 401 with ``WWW-Authenticate: Bearer``. A key of the wrong role: 403.
- Modes: ``keys`` always asks for a key; ``off`` (``--no-auth``, for trusted networks) never
  does; ``auto`` (the default) asks for one as soon as the store holds any active key, and
  until then serves loopback callers only, so a fresh install works on one machine and is never
  open to the network.

The caller is resolved once per request (``request.state.principal``). Checking a new key runs
a slow hash (scrypt): in a small pool of threads of its own (one per core), never on the event
loop, so a burst of new keys neither blocks the loop nor takes the threads the request path
uses; the requests that bring the same new key at once share its one check. A key checked
before is found by a fast hash of the token (:meth:`~evidex.store.SqlStore.verify_key`).

Pages a browser opens (the UI, ``/docs``) also take the UI's login session cookie; the JSON API
takes only the header, so a cookie never authorises an API write that a CSRF token does not
guard.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from evidex.store import ApiKey, SqlStore

__all__ = ["SESSION_COOKIE", "AuthMode", "Gate", "Principal", "is_loopback"]

SESSION_COOKIE = "evidex_session"

AuthMode = Literal["auto", "keys", "off"]

_bearer = HTTPBearer(auto_error=False, description="An evidex API key (`evidex keys create`).")


@dataclass(frozen=True)
class Principal:
    """The caller of a request: a key's id, name and role."""

    key_id: str
    name: str
    role: str

    def may(self, *roles: str) -> bool:
        return self.role == "admin" or self.role in roles

    def refusal(self, *roles: str) -> str | None:
        """Why this caller may not do what needs one of ``roles`` (None: it may); the 403's
        message, and the MCP tools' refusal."""
        if self.may(*roles):
            return None
        return f"this needs a {' or '.join(roles)} key; yours is {self.role}"


LOCAL = Principal(key_id="", name="local (no keys exist yet)", role="admin")
OPEN = Principal(key_id="", name="anyone (--no-auth)", role="admin")


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Gate:
    """Resolves the caller of a request and checks its role."""

    HAS_KEYS_TTL_S = 5.0
    """How long ``auto`` mode trusts its last look at whether any key exists."""

    def __init__(self, store: SqlStore, mode: AuthMode = "auto") -> None:
        if mode not in ("auto", "keys", "off"):
            raise ValueError(f"unknown auth mode {mode!r}")
        self.store = store
        self.mode: AuthMode = mode
        self._has_keys: tuple[float, bool] = (float("-inf"), False)
        self._checks: dict[str, asyncio.Future[ApiKey | None]] = {}
        self._pool = ThreadPoolExecutor(
            max_workers=os.cpu_count() or 1, thread_name_prefix="evidex-key-check"
        )

    async def keys_exist(self) -> bool:
        checked, value = self._has_keys
        if time.monotonic() - checked > self.HAS_KEYS_TTL_S:
            value = await asyncio.to_thread(self.store.has_keys)
            self._has_keys = (time.monotonic(), value)
        return value

    async def principal(
        self, request: Request, token: str | None, *, cookie: bool = False
    ) -> Principal | None:
        """The caller, or None when it must show a key first."""
        if self.mode == "off":
            return OPEN
        if token:
            key = self.store.recently_verified(token) or await self._verify(token)
            return Principal(key.key_id, key.name, key.role) if key else None
        session_token = request.cookies.get(SESSION_COOKIE) if cookie else None
        if session_token:
            session = await asyncio.to_thread(self.store.session, session_token)
            if session is not None:
                request.state.session = session
                return Principal(session.key.key_id, session.key.name, session.key.role)
        if self.mode == "auto" and not await self.keys_exist():
            client = request.client.host if request.client else None
            return LOCAL if is_loopback(client) else None
        return None

    async def _verify(self, token: str) -> ApiKey | None:
        """The key of ``token``, checked in the key-check pool, once for every request that
        brings it while its check runs."""
        check = self._checks.get(token)
        if check is None:
            loop = asyncio.get_running_loop()
            check = loop.run_in_executor(self._pool, self.store.verify_key, token)
            self._checks[token] = check
            check.add_done_callback(lambda _: self._checks.pop(token, None))
        return await asyncio.shield(check)

    def requires(self, *roles: str, cookie: bool = False) -> Callable[..., Awaitable[Principal]]:
        """A FastAPI dependency: the caller, if it holds one of ``roles`` (admin always does).
        ``cookie``: a UI login session counts too (pages, never the JSON API)."""

        async def check(
            request: Request,
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
        ) -> Principal:
            principal = getattr(request.state, "principal", None)
            if principal is None:
                token = credentials.credentials if credentials else None
                principal = await self.principal(request, token, cookie=cookie)
                if principal is None:
                    raise HTTPException(
                        status_code=401,
                        detail="send an API key as 'Authorization: Bearer KEY'"
                        if not credentials
                        else "the API key is unknown or revoked",
                        headers={"WWW-Authenticate": "Bearer"},
                    )
                request.state.principal = principal
            refusal = principal.refusal(*roles)
            if refusal is not None:
                raise HTTPException(status_code=403, detail=refusal)
            return principal

        return check
