"""Keys and roles: who may call what, how keys are stored, and what an unauthenticated or
wrongly-scoped caller gets (401 / 403), over the in-process client and a real uvicorn server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from evidex.cli import main
from evidex.store import SqlStore, open_store
from tests.live_service import serve_app
from tests.scripted import ScriptedJudge, tier_reply

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from evidex.service import create_app

PASSAGES = [
    {"passage_id": "a", "text": "Most adults need 600 IU of vitamin D a day."},
    {"passage_id": "b", "text": "The D-Day landings took place in June 1944."},
]
TIER = {"query": "vitamin D dose", "passages": PASSAGES, "judge": "scripted"}


@pytest.fixture
def keyed(store: SqlStore) -> dict[str, str]:
    return {
        role: store.create_key(role, f"{role}-one")[1] for role in ("client", "reviewer", "admin")
    }


def _app(store: SqlStore, judge: ScriptedJudge | None = None, **kw: Any) -> TestClient:
    judges = {"scripted": judge or ScriptedJudge([tier_reply] * 10)}
    kw.setdefault("allowed_hosts", ["testserver"])
    return TestClient(create_app(store, judges=judges, **kw))


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _walk(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


# ---------------------------------------------------------------------------- roles


def test_each_role_reaches_its_endpoints_and_gets_403_elsewhere(
    store: SqlStore, keyed: dict[str, str]
) -> None:
    client = _app(store)
    expectations = {
        # (method, path, body): {role: status}
        ("post", "/tier", json.dumps(TIER)): {"client": 200, "reviewer": 403, "admin": 200},
        ("get", "/review", None): {"client": 403, "reviewer": 200, "admin": 200},
        ("get", "/log", None): {"client": 403, "reviewer": 200, "admin": 200},
        ("get", "/keys", None): {"client": 403, "reviewer": 403, "admin": 200},
        ("get", "/openapi.json", None): {"client": 200, "reviewer": 200, "admin": 200},
        ("get", "/docs", None): {"client": 200, "reviewer": 200, "admin": 200},
        ("get", "/metrics", None): {"client": 200, "reviewer": 200, "admin": 200},
    }
    for (method, path, body), by_role in expectations.items():
        for role, status in by_role.items():
            response = client.request(
                method,
                path,
                content=body,
                headers={**_bearer(keyed[role]), "Content-Type": "application/json"},
            )
            assert response.status_code == status, (method, path, role, response.text)
            if status == 403:
                assert role in response.json()["detail"]


def test_no_key_or_a_bad_key_is_401_with_a_bearer_challenge(
    store: SqlStore, keyed: dict[str, str]
) -> None:
    client = _app(store)
    forged = keyed["admin"][:-4] + "AAAA"
    for headers in ({}, _bearer("nonsense"), _bearer(forged), {"Authorization": "Basic eDp5"}):
        for method, path in (("get", "/review"), ("post", "/tier"), ("get", "/docs")):
            response = client.request(method, path, json=TIER, headers=headers)
            assert response.status_code == 401, (path, headers, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
    assert client.get("/healthz").status_code == 200  # load balancers probe without a key


def test_a_revoked_key_stops_working_at_once(store: SqlStore, keyed: dict[str, str]) -> None:
    client = _app(store)
    assert client.get("/review", headers=_bearer(keyed["reviewer"])).status_code == 200
    key_id = keyed["reviewer"].split("_")[1]
    admin = _bearer(keyed["admin"])
    assert client.post(f"/keys/{key_id}/revoke", headers=admin).status_code == 200
    assert client.get("/review", headers=_bearer(keyed["reviewer"])).status_code == 401
    assert client.post(f"/keys/{key_id}/revoke", headers=admin).status_code == 422


def test_admin_makes_keys_over_http_and_the_secret_is_shown_once(
    store: SqlStore, keyed: dict[str, str]
) -> None:
    client = _app(store)
    admin = _bearer(keyed["admin"])
    made = client.post("/keys", json={"role": "client", "name": "ci"}, headers=admin)
    assert made.status_code == 201 and made.json()["key"].startswith("evx_")
    assert client.post("/tier", json=TIER, headers=_bearer(made.json()["key"])).status_code == 200
    listed = client.get("/keys", headers=admin).json()
    assert {k["name"] for k in listed} == {"client-one", "reviewer-one", "admin-one", "ci"}
    assert "key" not in {field for k in listed for field in k}
    bad = client.post("/keys", json={"role": "root"}, headers=admin)
    assert bad.status_code == 422 and "unknown role" in bad.json()["detail"]


def test_keys_are_stored_as_slow_salted_digests_never_as_themselves(store: SqlStore) -> None:
    _, secret = store.create_key("client")
    _, again = store.create_key("client")
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM api_keys"))]
    dumped = json.dumps(rows, default=str)
    for key in (secret, again):
        assert key.split("_", 2)[2] not in dumped
    assert rows[0]["salt"] != rows[1]["salt"] and len(rows[0]["digest"]) == 64


def test_a_token_is_hashed_slowly_once_then_only_its_row_is_read_again(
    store: SqlStore, keyed: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidex.store import _keys

    hashed: list[str] = []
    slow = _keys._digest
    monkeypatch.setattr(
        _keys, "_digest", lambda secret, salt: hashed.append(salt) or slow(secret, salt)
    )
    assert store.verify_key(keyed["client"]) is not None
    assert len(hashed) == 1
    monkeypatch.setattr(_keys, "VERIFIED_TTL_S", 0.0)  # every check is stale from now on
    assert store.recently_verified(keyed["client"]) is None
    assert store.verify_key(keyed["client"]) is not None  # the row read again, no scrypt
    assert len(hashed) == 1
    other = open_store(store.url)  # another replica revokes it
    other.revoke_key(keyed["client"].split("_")[1])
    other.close()
    assert store.verify_key(keyed["client"]) is None
    wrong = keyed["reviewer"][:-2] + ("AA" if not keyed["reviewer"].endswith("AA") else "BB")
    assert store.verify_key(wrong) is None  # an unknown token is hashed, never trusted
    assert len(hashed) == 2


def test_requests_bringing_one_new_key_at_once_share_its_check(
    store: SqlStore, keyed: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from evidex.service.auth import Gate

    checks: list[str] = []
    verify = store.verify_key

    def counted(token: str) -> Any:
        checks.append(token)
        time.sleep(0.2)  # a slow hash, while the other requests arrive
        return verify(token)

    monkeypatch.setattr(store, "verify_key", counted)
    gate = Gate(store, "keys")

    async def many() -> list[Any]:
        calls = [gate.principal(None, keyed["client"]) for _ in range(20)]  # type: ignore[arg-type]
        return await asyncio.gather(*calls)

    principals = asyncio.run(many())
    assert len(checks) == 1
    assert {p.role for p in principals} == {"client"}


def test_client_responses_carry_grades_and_reasons_but_no_raw_judge_output(
    store: SqlStore, keyed: dict[str, str]
) -> None:
    judge = ScriptedJudge(["not json", "still not json", "nope"])
    body = _app(store, judge).post("/tier", json=TIER, headers=_bearer(keyed["client"])).json()
    fields = set(_walk(body))
    assert {"tier", "reason", "source"} <= fields
    assert not fields & {"raw_output", "raw", "messages"}
    assert isinstance(body["attempts"], int)  # a count; the attempts themselves stay internal
    assert "not json" not in json.dumps(body)


def test_a_reviewer_resolves_as_itself_and_cannot_name_someone_else(
    store: SqlStore, keyed: dict[str, str]
) -> None:
    from evidex.harness.ports import ReviewRequest

    item = store.add_review(
        ReviewRequest(
            job="tier", reason="fallback", risk="high", run_id="r1", passage_ids=["a"], payload={}
        )
    )
    client = _app(store)
    reviewer = _bearer(keyed["reviewer"])
    other = client.post(
        f"/review/{item}/resolve",
        json={"decision": "irrelevant", "reviewer": "mallory"},
        headers=reviewer,
    )
    assert other.status_code == 422 and "reviewer-one" in other.json()["detail"]
    done = client.post(f"/review/{item}/resolve", json={"decision": "irrelevant"}, headers=reviewer)
    assert done.status_code == 200 and done.json()["reviewer"] == "reviewer-one"
    bad = client.post(f"/review/{item}/resolve", json={"decision": "banana"}, headers=reviewer)
    assert bad.status_code in (409, 422)


# ---------------------------------------------------------------------------- modes


def test_auto_mode_serves_loopback_until_the_first_key_then_asks_for_one(store: SqlStore) -> None:
    app = create_app(store, judges={"scripted": ScriptedJudge([tier_reply] * 4)})
    app.state.gate.HAS_KEYS_TTL_S = 0.0
    with serve_app(app) as base:
        assert httpx.get(f"{base}/review").status_code == 200  # no keys yet: this machine only
        _, key = store.create_key("reviewer")
        assert httpx.get(f"{base}/review").status_code == 401
        assert httpx.get(f"{base}/review", headers=_bearer(key)).status_code == 200
    # the in-process client is not a loopback address: refused even with no key in the store
    fresh = open_store("sqlite://")
    assert _app(fresh).get("/review").status_code == 401
    fresh.close()


def test_keys_mode_asks_for_a_key_even_before_one_exists(store: SqlStore) -> None:
    with serve_app(create_app(store, auth="keys")) as base:
        assert httpx.get(f"{base}/review").status_code == 401


# ---------------------------------------------------------------------------- hosts, CORS, headers


def test_unknown_host_headers_are_refused(store: SqlStore, keyed: dict[str, str]) -> None:
    with serve_app(create_app(store)) as base:
        port = base.rsplit(":", 1)[1]
        ok = httpx.get(f"{base}/healthz", headers={"Host": f"localhost:{port}"})
        rebound = httpx.get(f"{base}/healthz", headers={"Host": "attacker.example"})
    assert ok.status_code == 200
    assert rebound.status_code == 400


def test_cors_is_off_unless_origins_are_given(store: SqlStore, keyed: dict[str, str]) -> None:
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    closed = _app(store).options("/tier", headers=preflight)
    assert "access-control-allow-origin" not in closed.headers
    opened = _app(store, cors_origins=["https://app.example"]).options("/tier", headers=preflight)
    assert opened.headers["access-control-allow-origin"] == "https://app.example"


def test_every_response_carries_the_security_headers(
    store: SqlStore, keyed: dict[str, str]
) -> None:
    client = _app(store)
    for response in (client.get("/healthz"), client.get("/review")):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["referrer-policy"] == "no-referrer"


def test_openapi_declares_the_bearer_scheme(store: SqlStore, keyed: dict[str, str]) -> None:
    spec = _app(store).get("/openapi.json", headers=_bearer(keyed["client"])).json()
    schemes = spec["components"]["securitySchemes"]
    assert {s["scheme"].lower() for s in schemes.values()} == {"bearer"}
    assert spec["paths"]["/tier"]["post"]["security"]


# ---------------------------------------------------------------------------- CLI


def test_keys_cli_creates_lists_and_revokes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'keys.db'}"
    assert main(["keys", "create", "--role", "reviewer", "--name", "alice", "--db", db]) == 0
    out, err = capsys.readouterr()
    key = out.strip().splitlines()[-1]
    assert key.startswith("evx_") and "alice" in err
    assert main(["keys", "list", "--json", "--db", db]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(k["name"], k["role"]) for k in listed] == [("alice", "reviewer")]
    assert key not in json.dumps(listed)
    assert main(["keys", "revoke", listed[0]["key_id"], "--db", db]) == 0
    assert main(["keys", "revoke", listed[0]["key_id"], "--db", db]) == 2
    assert "already revoked" in capsys.readouterr().err
    assert main(["keys", "create", "--role", "root", "--db", db]) == 2
    store = open_store(db)
    assert store.verify_key(key) is None
    store.close()


def test_serve_refuses_a_network_address_while_no_key_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["serve", "--host", "0.0.0.0", "--db", db]) == 2
    assert "evidex keys create" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_auth_serves_everyone_and_says_so_loudly(tmp_path: Path) -> None:
    port = _free_port()
    db = f"sqlite:///{tmp_path / 'open.db'}"
    store = open_store(db)
    store.create_key("admin")  # a key exists, yet --no-auth serves without one
    store.close()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "evidex"),
            "serve",
            "--no-auth",
            "--port",
            str(port),
            "--db",
            db,
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline and status is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/review").status_code
            except httpx.TransportError:
                time.sleep(0.2)
        assert status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "AUTHENTICATION IS OFF" in err


def test_a_server_answers_its_own_names_and_bound_address_unless_told_otherwise() -> None:
    from evidex.service.app import LOOPBACK_HOSTS, allowed_hosts_for

    assert allowed_hosts_for("127.0.0.1", []) == list(LOOPBACK_HOSTS)
    assert allowed_hosts_for("10.1.2.3", []) == [*LOOPBACK_HOSTS, "10.1.2.3"]
    assert allowed_hosts_for("0.0.0.0", []) == ["*"]
    assert allowed_hosts_for("0.0.0.0", ["evidex.internal"]) == ["evidex.internal"]
