"""A review queue that several reviewers and processes share.

Two processes resolve the same items (each exactly once; the other gets the conflict), claims
lease items (never the same item to two reviewers while the lease holds), decisions are checked
per job when written, enqueueing is idempotent (a cache-served repeat adds no item), items hold
their passages in full, ten processes migrate a fresh database at once, and the CLI's lists are
the API's JSON arrays.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import evidex
from evidex.errors import InputError, ReviewConflict
from evidex.harness.ports import ReviewRequest
from evidex.harness.runner import HarnessSettings
from evidex.store import SqlStore, open_store
from evidex.types import Passage
from tests.scripted import ScriptedJudge, tier_reply

with contextlib.suppress(pytest.skip.Exception):  # skips itself without psycopg
    from tests.test_store_postgres import pg_url  # noqa: F401  (the server fixture, reused)

EVIDEX = str(Path(sys.executable).with_name("evidex"))
ROOT = Path(__file__).resolve().parents[1]


def _items(store: SqlStore, n: int, job: str = "tier") -> list[int]:
    return [
        store.add_review(
            ReviewRequest(
                job=job,
                reason=f"item {i}",
                run_id="r",
                passage_ids=[f"p{i}"],
                payload={"query": f"q{i}"},
            )
        )
        for i in range(n)
    ]


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _results(procs: list[subprocess.Popen[str]], timeout: float = 240) -> list[Any]:
    # every process is read to its end before any assertion, so a failure leaves no open pipe
    # behind to warn in a later test
    outputs = [proc.communicate(timeout=timeout) for proc in procs]
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr
    return [json.loads(stdout) for stdout, _ in outputs]


# ---------------------------------------------------------------------------- resolve once

RESOLVER = """
    import json, sys, time
    from evidex.errors import ReviewConflict
    from evidex.store import open_store
    url, who, ids, start = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
    store = open_store(url)
    while time.time() < start:
        time.sleep(0.001)
    won, lost = [], []
    for item_id in ids:
        try:
            store.resolve_review(item_id, decision="irrelevant", reviewer=who)
            won.append(item_id)
        except ReviewConflict:
            lost.append(item_id)
    print(json.dumps({"won": won, "lost": lost}))
"""


def _race_resolvers(url: str, ids: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    start = str(time.time() + 3)  # both start at the same moment, after their imports
    a, b = _results(
        [
            _python(RESOLVER, url, "ana", json.dumps(ids), start),
            _python(RESOLVER, url, "ben", json.dumps(ids), start),
        ]
    )
    return a, b


def _assert_resolved_once(store: SqlStore, ids: list[int], a: Any, b: Any) -> None:
    assert sorted(a["won"] + b["won"]) == ids  # every item resolved, by one of them
    assert set(a["won"]).isdisjoint(b["won"])  # 0 resolved twice
    assert sorted(a["lost"]) == sorted(b["won"]) and sorted(b["lost"]) == sorted(a["won"])
    rows = {r["id"]: r for r in store.list_reviews(status=None)}
    assert all(rows[i]["reviewer"] == "ana" for i in a["won"])  # the first decision stands
    assert all(rows[i]["reviewer"] == "ben" for i in b["won"])


def test_two_processes_resolve_each_item_exactly_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    store = open_store(url)
    ids = _items(store, 300)
    a, b = _race_resolvers(url, ids)
    _assert_resolved_once(store, ids, a, b)
    store.close()


def test_a_second_resolve_exits_2_in_the_cli_and_is_409_in_the_service(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    store = open_store(db)
    [item] = _items(store, 1)
    store.close()
    resolve = [EVIDEX, "review", "resolve", str(item), "--db", db, "--reviewer"]
    procs = [
        subprocess.Popen([*resolve, who, "-d", "irrelevant"], stderr=subprocess.PIPE, text=True)
        for who in ("ana", "ben")
    ]
    errs = [p.communicate(timeout=60)[1] for p in procs]
    outcomes = sorted((p.returncode, err) for p, err in zip(procs, errs, strict=True))
    assert [code for code, _ in outcomes] == [0, 2]
    assert "conflict: review item" in outcomes[1][1] and "already resolved" in outcomes[1][1]

    from fastapi.testclient import TestClient

    from evidex.service import create_app

    client = TestClient(create_app(db, auth="off", allowed_hosts=["testserver"]))
    response = client.post(f"/review/{item}/resolve", json={"decision": "irrelevant"})
    assert response.status_code == 409 and response.json()["error"] == "ReviewConflict"


# ---------------------------------------------------------------------------- leases


def test_claims_never_share_an_item_while_the_lease_holds(store: SqlStore) -> None:
    ids = _items(store, 3)
    first = store.claim_review("ana")
    second = store.claim_review("ben")
    assert first and second and first["id"] == ids[0] and second["id"] == ids[1]
    assert first["lease_holder"] == "ana" and first["lease_expires_at"] > first["created_at"]
    with pytest.raises(ReviewConflict, match="claimed by ana"):
        store.resolve_review(ids[0], decision="irrelevant", reviewer="ben")
    assert store.get_review(ids[0])["status"] == "pending"  # nothing written
    store.resolve_review(ids[0], decision="irrelevant", reviewer="ana")  # the holder may
    third = store.claim_review("ana")
    assert third and third["id"] == ids[2]
    assert store.claim_review("cleo") is None  # everything is held or resolved
    store.release_review(ids[2], "ana")
    again = store.claim_review("cleo")
    assert again and again["id"] == ids[2]


def test_an_expired_lease_can_be_claimed_again(store: SqlStore) -> None:
    [item] = _items(store, 1)
    assert store.claim_review("ana", lease_s=0.2)
    assert store.claim_review("ben") is None
    time.sleep(0.3)
    taken = store.claim_review("ben")
    assert taken and taken["id"] == item and taken["lease_holder"] == "ben"
    with pytest.raises(ReviewConflict, match="claimed by ben"):
        store.resolve_review(item, decision="irrelevant", reviewer="ana")


CLAIMER = """
    import json, sys, time
    from evidex.store import open_store
    url, who, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    store = open_store(url)
    while time.time() < start:
        time.sleep(0.001)
    got = []
    while (item := store.claim_review(who, lease_s=600)) is not None:
        got.append(item["id"])
    print(json.dumps(got))
"""


def _race_claimers(url: str, ids: list[int]) -> None:
    start = str(time.time() + 3)
    a, b = _results([_python(CLAIMER, url, who, start) for who in ("ana", "ben")])
    assert set(a).isdisjoint(b), "an item was claimed by both"
    assert sorted(a + b) == ids


def test_two_processes_claiming_at_once_get_disjoint_items(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'claims.db'}"
    store = open_store(url)
    ids = _items(store, 150)
    _race_claimers(url, ids)
    store.close()


# ---------------------------------------------------------------------------- decisions


CASES: list[tuple[str, dict[str, Any], list[str], list[str], list[str]]] = [
    (
        "tier",
        {"query": "q"},
        ["p1", "p2"],
        ["irrelevant", "Accept", "reject", '{"p1": "directly-supporting", "p2": "irrelevant"}'],
        [
            "banana",
            "<script>",
            '{"p9": "irrelevant"}',
            '{"p1": "banana"}',
            "[]",
            '{"p1": "irrelevant"}',
        ],
    ),
    (
        "tier",
        {"query": "q", "tiers": ["gold", "lead"]},
        ["p1"],
        ["gold", "lead", "accept"],
        ["irrelevant", "Gold"],
    ),
    (
        "classify",
        {"input": "x", "labels": ["refund", "delivery"]},
        ["p1"],
        ["refund", "unclassifiable", "reject", '["refund", "delivery"]'],
        ["banana", '["refund", "refund"]', '["nope"]', "{}"],
    ),
    (
        "audit",
        {"question": "q", "claims": [{"claim_id": "c1"}, {"claim_id": "c2"}]},
        [],
        [
            "contradicted",
            "fully_supported",
            "accept",
            "reject",
            '{"c1": "inferred", "c2": "unsupported"}',
            '{"verdict": "block", "claims": {"c1": "inferred", "c2": "contradicted"}}',
        ],
        [
            "banana",
            "supported",
            '{"c9": "inferred"}',
            '{"c1": "block"}',
            '{"c1": "inferred"}',  # c2 left out
            "publish",  # a verdict without the claims' statuses
            "review",  # where the answer already is
            '{"verdict": "publish", "claims": {"c1": "inferred"}}',
        ],
    ),
    (
        "rerank",
        {"query": "q"},
        ["p1", "p2", "p3"],
        ["accept", "reject", '["p3", "p1", "p2"]', "p2, p1", "p1"],
        ["banana", '["p1", "p1"]', '["p9"]', "p1, p9", "irrelevant"],
    ),
]


@pytest.mark.parametrize(("job", "payload", "ids", "good", "bad"), CASES)
def test_decisions_are_checked_when_written(
    store: SqlStore,
    job: str,
    payload: dict[str, Any],
    ids: list[str],
    good: list[str],
    bad: list[str],
) -> None:
    def item() -> int:
        request = ReviewRequest(
            job=job, reason=f"r{time.monotonic_ns()}", run_id="r", passage_ids=ids, payload=payload
        )
        return store.add_review(request)

    for decision in bad:
        target = item()
        with pytest.raises(InputError, match=r"allowed|at most once|maps this item|lists this"):
            store.resolve_review(target, decision=decision)
        assert store.get_review(target)["status"] == "pending"  # still resolvable
    for decision in good:
        assert store.resolve_review(item(), decision=decision)["status"] == "resolved"


def test_a_bad_decision_names_the_allowed_values_exit_2_and_422(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'bad.db'}"
    store = open_store(db)
    [item] = _items(store, 1)
    with pytest.raises(InputError) as caught:
        store.resolve_review(item, decision="banana")
    assert "directly-supporting" in str(caught.value) and "accept" in str(caught.value)
    store.close()
    done = subprocess.run(
        [EVIDEX, "review", "resolve", str(item), "-d", "banana", "--db", db],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "is not allowed for this tier item" in done.stderr

    from fastapi.testclient import TestClient

    from evidex.service import create_app

    client = TestClient(create_app(db, auth="off", allowed_hosts=["testserver"]))
    response = client.post(f"/review/{item}/resolve", json={"decision": "<script>"})
    assert response.status_code == 422 and "irrelevant" in response.json()["detail"]
    assert client.post(f"/review/{item}/resolve", json={"decision": "irrelevant"}).is_success


# ---------------------------------------------------------------------------- enqueue


def test_the_same_request_twice_is_one_item(store: SqlStore) -> None:
    request = ReviewRequest(
        job="tier", reason="fallback", run_id="r1", passage_ids=["p1"], payload={"query": "q"}
    )
    first = store.add_review(request)
    retried = store.add_review(request.model_copy(update={"run_id": "r2"}))
    assert retried == first and len(store.list_reviews()) == 1
    other = store.add_review(request.model_copy(update={"reason": "another reason"}))
    assert other != first and len(store.list_reviews()) == 2
    store.resolve_review(first, decision="irrelevant")
    assert store.add_review(request) not in (first, other)  # resolved: a new round of review


ENQUEUER = """
    import json, sys, time
    from evidex.harness.ports import ReviewRequest
    from evidex.store import open_store
    url, start = sys.argv[1], float(sys.argv[2])
    store = open_store(url)
    while time.time() < start:
        time.sleep(0.001)
    ids = [
        store.add_review(ReviewRequest(job="tier", reason=f"r{i}", run_id=str(time.time())))
        for i in range(60)
    ]
    print(json.dumps(ids))
"""


def test_concurrent_enqueues_of_the_same_items_keep_one_each(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'enqueue.db'}"
    store = open_store(url)
    start = str(time.time() + 3)
    a, b = _results([_python(ENQUEUER, url, start) for _ in range(2)])
    assert a == b and len(store.list_reviews()) == 60
    store.close()


def test_a_cache_served_high_risk_repeat_adds_no_item_and_items_hold_passages(
    store: SqlStore, passages: list[Passage]
) -> None:
    titled = [
        p.model_copy(update={"title": f"T{p.passage_id}", "url": "https://x"}) for p in passages
    ]
    judge = ScriptedJudge([tier_reply])  # one reply: the repeat must come from the cache

    def run() -> evidex.TierResult:
        return evidex.tier(
            "how much vitamin D?",
            titled,
            judge=judge,
            store=store,
            risk="high",
            settings=HarnessSettings(backoff_s=0.0),
        )

    first, second = run(), run()
    assert first.review_item_ids and second.review_item_ids == first.review_item_ids
    assert all(c.source == "cache" for c in second.classifications)
    items = store.list_reviews()
    assert len(items) == len(first.review_item_ids) == len(passages)
    for item in items:
        [pid] = item["passage_ids"]
        [stored] = item["payload"]["passages"]
        original = next(p for p in titled if p.passage_id == pid)
        assert stored == {
            "passage_id": pid,
            "text": original.text,
            "title": original.title,
            "url": "https://x",
        }
        assert item["payload"]["tiers"][0] == "directly-supporting"


def test_a_fallback_item_holds_every_passage_in_full(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = ScriptedJudge(["not JSON", "not JSON", "not JSON"])
    result = evidex.tier(
        "q", passages, judge=judge, store=store, settings=HarnessSettings(backoff_s=0.0)
    )
    [item] = [store.get_review(i) for i in result.review_item_ids]
    assert [p["text"] for p in item["payload"]["passages"]] == [p.text for p in passages]
    assert item["payload"]["tiers"][-1] == "irrelevant"


# ---------------------------------------------------------------------------- migrations

MIGRATOR = """
    import json, sys, time
    from evidex.store import open_store
    url, start = sys.argv[1], float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.0005)
    store = open_store(url)
    print(json.dumps(store.schema_version()))
"""


def _latest_version() -> int:
    store = open_store("sqlite://")
    try:
        return store.schema_version()
    finally:
        store.close()


LATEST = _latest_version()


def _ten_at_once(url: str) -> list[int]:
    start = str(time.time() + 4)
    return [int(v) for v in _results([_python(MIGRATOR, url, start) for _ in range(10)])]


def test_ten_processes_migrate_a_fresh_sqlite_file_at_once(tmp_path: Path) -> None:
    for round_ in range(3):
        url = f"sqlite:///{tmp_path / f'fresh{round_}.db'}"
        assert _ten_at_once(url) == [LATEST] * 10
        store = open_store(url)
        assert store.migrate() == [] and store.schema_version() == LATEST
        store.close()


# ---------------------------------------------------------------------------- list shapes


def test_cli_lists_are_the_api_json_arrays(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'lists.db'}"
    store = open_store(db)
    _items(store, 3)
    store.append_audit(evidex.harness.events.AuditRecord(run_id="r", job="tier", status="ok"))
    store.close()

    from fastapi.testclient import TestClient

    from evidex.service import create_app

    client = TestClient(create_app(db, auth="off", allowed_hosts=["testserver"]))
    for cli, api in ((["review", "list"], "/review"), (["log"], "/log")):
        done = subprocess.run(
            [EVIDEX, *cli, "--json", "--db", db], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)  # one document, not JSON lines
        served = client.get(api).json()
        assert isinstance(printed, list) and printed and _same(printed, served)


def _same(printed: Any, served: Any) -> bool:
    """Equal documents; a time may be written with "+00:00" or "Z"."""
    if isinstance(printed, list) and isinstance(served, list):
        return len(printed) == len(served) and all(map(_same, printed, served))
    if isinstance(printed, dict) and isinstance(served, dict):
        return printed.keys() == served.keys() and all(
            _same(printed[k], served[k]) for k in printed
        )
    if isinstance(printed, str) and isinstance(served, str) and printed != served:
        try:
            return datetime.fromisoformat(printed) == datetime.fromisoformat(served)
        except ValueError:
            return False
    return bool(printed == served)


# ---------------------------------------------------------------------------- PostgreSQL


def _new_database(server: str) -> str:
    name = f"evidex_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
def fresh_pg(request: pytest.FixtureRequest) -> str:
    """A new, empty database on the PostgreSQL server of :mod:`tests.test_store_postgres`
    (which the test ends with the server)."""
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    return _new_database(str(request.getfixturevalue("pg_url")))


@pytest.mark.network
def test_postgres_two_processes_resolve_each_item_exactly_once(fresh_pg: str) -> None:
    store = open_store(fresh_pg)
    ids = _items(store, 300)
    a, b = _race_resolvers(fresh_pg, ids)
    _assert_resolved_once(store, ids, a, b)
    store.close()


@pytest.mark.network
def test_postgres_claims_skip_locked_rows_and_never_share(fresh_pg: str) -> None:
    store = open_store(fresh_pg)
    ids = _items(store, 150)
    _race_claimers(fresh_pg, ids)
    [extra] = _items(store, 1, job="rerank")
    assert store.claim_review("ana", job="tier") is None  # every tier item is held
    claimed = store.claim_review("ana", job="rerank", lease_s=0.2)
    assert claimed and claimed["id"] == extra
    time.sleep(0.3)
    again = store.claim_review("ben")
    assert again and again["id"] == extra and again["lease_holder"] == "ben"
    store.close()


@pytest.mark.network
def test_postgres_concurrent_enqueues_keep_one_item_each(fresh_pg: str) -> None:
    store = open_store(fresh_pg)
    start = str(time.time() + 3)
    a, b = _results([_python(ENQUEUER, fresh_pg, start) for _ in range(2)])
    assert a == b and len(store.list_reviews()) == 60
    store.close()


@pytest.mark.network
def test_postgres_ten_processes_migrate_a_fresh_database_at_once(
    fresh_pg: str, request: pytest.FixtureRequest
) -> None:
    for url in (fresh_pg, _new_database(str(request.getfixturevalue("pg_url")))):
        assert _ten_at_once(url) == [LATEST] * 10


@pytest.mark.network
def test_two_service_replicas_on_one_postgres_never_share_or_double_resolve(
    fresh_pg: str,
) -> None:
    """Two ``evidex serve`` processes over one database, a reviewer on each, racing over HTTP:
    claims never hand one item to both, and each item is resolved once (the loser gets 409)."""
    import concurrent.futures

    import httpx

    from tests.live_service import serve_process

    store = open_store(fresh_pg)
    claim_ids, resolve_ids = _items(store, 100), _items(store, 200, job="rerank")
    keys = {who: store.create_key("reviewer", who)[1] for who in ("ana", "ben")}

    def claimer(base: str, who: str) -> list[int]:
        got = []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys[who]}"}) as c:
            while (item := c.post("/review/claim", json={"job": "tier"}).json()) is not None:
                got.append(item["id"])
        return got

    def resolver(base: str, who: str) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {"won": [], "lost": []}
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys[who]}"}) as c:
            for i, item in enumerate(resolve_ids):  # a ranking of the item's one passage
                response = c.post(f"/review/{item}/resolve", json={"decision": f'["p{i}"]'})
                assert response.status_code in (200, 409), response.text
                out["won" if response.status_code == 200 else "lost"].append(item)
        return out

    with (
        serve_process(fresh_pg) as a,
        serve_process(fresh_pg) as b,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        ana, ben = pool.map(claimer, (a, b), ("ana", "ben"))
        assert sorted(ana + ben) == claim_ids and set(ana).isdisjoint(ben)
        won_a, won_b = pool.map(resolver, (a, b), ("ana", "ben"))
    _assert_resolved_once(store, resolve_ids, won_a, won_b)
    store.close()
