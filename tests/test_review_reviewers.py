"""Several reviewers per review item, adjudication and assignment, in the store, on SQLite and
on a real PostgreSQL server.

An item needs as many independent decisions as the queue's settings say (a rule may ask two
for high risk); it is resolved when they agree (in whatever words: ``accept`` of the judge's
tier is that tier), disputed when they do not, and an adjudication settles a dispute. Nobody
sees another's decision on an open item before deciding it. An assigned item is claimed and
decided by its assignee alone while it is assigned, and claims take a reviewer's assigned
items first. Two processes deciding the same items at once never leave one short of a
decision it has. A database of the schema before (version 4) keeps its resolved decisions.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from evidex.errors import ConfigError, InputError, ReviewConflict
from evidex.harness.ports import ReviewRequest
from evidex.review_policy import ReviewRule, ReviewSettings
from evidex.store import SqlStore, open_store
from evidex.store import _schema as schema
from evidex.store._review_decisions import visible_decisions
from evidex.store._util import now
from tests.test_review_queue import _new_database, _python, _results

with contextlib.suppress(pytest.skip.Exception):  # skips itself without psycopg
    from tests.test_store_postgres import pg_url  # noqa: F401  (the server fixture, reused)

TWO = ReviewSettings(decisions=2)
TIERS = ["directly-supporting", "contextually-relevant", "irrelevant"]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.network)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'reviewers.db'}"
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    return _new_database(str(request.getfixturevalue("pg_url")))


@pytest.fixture
def two(url: str) -> Iterator[SqlStore]:
    """A store whose every new item needs two decisions."""
    store = open_store(url, review=TWO)
    yield store
    store.close()


def tier_item(store: SqlStore, n: int, *, risk: str = "low", reason: str = "high risk: x") -> int:
    """A tier item of one passage whose judge graded it directly-supporting."""
    pid = f"p{n}"
    return store.add_review(
        ReviewRequest(
            job="tier",
            reason=f"{reason} {n}",
            risk=risk,
            run_id=f"r{n}",
            passage_ids=[pid],
            payload={
                "query": f"q{n}",
                "passages": [{"passage_id": pid, "text": f"text {n}"}],
                "assignment": {"passage_id": pid, "tier": TIERS[0], "source": "judge"},
            },
        )
    )


# ---------------------------------------------------------------------------- settings


def test_rules_give_decisions_and_an_assignee_first_match_wins() -> None:
    settings = ReviewSettings(
        decisions=1,
        rules=[
            ReviewRule(risk="high", decisions=2),
            ReviewRule(job="audit", reason="Fallback", assign="ana"),
            ReviewRule(job="audit", decisions=3, assign="ben"),
        ],
    )
    assert settings.route("tier", "low", "high risk: x") == (1, None)
    assert settings.route("tier", "high", "high risk: x") == (2, None)
    assert settings.route("audit", "high", "fallback after 3 attempt(s): bad") == (2, "ana")
    assert settings.route("audit", "low", "fallback after 3 attempt(s): bad") == (3, "ana")
    assert settings.route("audit", "low", "unsupported ratio 0.5") == (3, "ben")
    with pytest.raises(ValueError, match="unknown job"):
        ReviewRule(job="tierr", decisions=2)
    with pytest.raises(ValueError, match="gives decisions, assign, or both"):
        ReviewRule(job="tier")
    with pytest.raises(ValueError):
        ReviewSettings(decisions=0)


def test_the_config_files_review_table_reaches_new_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[review]\ndecisions = 1\nrules = [{ risk = "high", decisions = 2 },'
        ' { reason = "fallback", assign = "ana" }]\n'
    )
    monkeypatch.setenv("EVIDEX_CONFIG", str(config))
    store = open_store(f"sqlite:///{tmp_path / 'cfg.db'}")
    high = store.get_review(tier_item(store, 1, risk="high"))
    low = store.get_review(tier_item(store, 2, reason="fallback after 3 attempt(s):"))
    assert (high["decisions_required"], high["assignee"]) == (2, None)
    assert (low["decisions_required"], low["assignee"]) == (1, "ana")
    store.close()
    config.write_text('[review]\nrules = [{ job = "nope", decisions = 2 }]\n')
    with pytest.raises(ConfigError, match="unknown job"):
        open_store(f"sqlite:///{tmp_path / 'bad.db'}").review_settings  # noqa: B018


# ---------------------------------------------------------------------------- deciding


def test_two_agreeing_decisions_resolve_in_any_words(two: SqlStore) -> None:
    item = tier_item(two, 1)
    first = two.resolve_review(item, decision="accept", reviewer="ana", note="as the judge")
    assert (first["status"], first["decisions_made"], first["decision"]) == ("pending", 1, None)
    with pytest.raises(ReviewConflict, match=r"ana has decided review item \d+ already"):
        two.resolve_review(item, decision="irrelevant", reviewer="ana")
    with pytest.raises(InputError, match="needs 2 independent decisions: name the reviewer"):
        two.resolve_review(item, decision=TIERS[0])
    done = two.resolve_review(item, decision=TIERS[0], reviewer="ben")  # = accept, in a word
    assert (done["status"], done["decision"], done["decisions_made"]) == ("resolved", "accept", 2)
    assert done["reviewer"] == "ana, ben" and done["note"] == "ana: as the judge"
    with pytest.raises(ReviewConflict, match="already resolved"):
        two.resolve_review(item, decision=TIERS[0], reviewer="cy")
    decisions = two.review_decisions([item])[item]
    assert [(x["reviewer"], x["kind"], x["decision"]) for x in decisions] == [
        ("ana", "review", "accept"),
        ("ben", "review", TIERS[0]),
    ]


def test_a_disagreement_waits_for_an_adjudication(two: SqlStore) -> None:
    item = tier_item(two, 1)
    with pytest.raises(ReviewConflict, match="no disagreement to settle; it is pending"):
        two.adjudicate_review(item, decision=TIERS[1], reviewer="lead")
    two.resolve_review(item, decision="accept", reviewer="ana")
    disputed = two.resolve_review(item, decision="irrelevant", reviewer="ben")
    assert (disputed["status"], disputed["decision"], disputed["decisions_made"]) == (
        "disputed",
        None,
        2,
    )
    for who in ("cy", "ana"):
        with pytest.raises(ReviewConflict, match="awaits adjudication"):
            two.resolve_review(item, decision="irrelevant", reviewer=who)
    assert two.claim_review("cy") is None  # a disputed item is not claimed for a decision
    with pytest.raises(InputError, match="not allowed"):
        two.adjudicate_review(item, decision="banana", reviewer="lead")
    settled = two.adjudicate_review(item, decision=TIERS[1], reviewer="lead", note="background")
    assert (settled["status"], settled["decision"], settled["reviewer"]) == (
        "resolved",
        TIERS[1],
        "lead",
    )
    with pytest.raises(ReviewConflict, match="no disagreement to settle; it is resolved"):
        two.adjudicate_review(item, decision=TIERS[0], reviewer="lead")
    kinds = [(x["reviewer"], x["kind"]) for x in two.review_decisions([item])[item]]
    assert kinds == [("ana", "review"), ("ben", "review"), ("lead", "adjudication")]


def test_nobody_sees_anothers_decision_before_deciding(two: SqlStore) -> None:
    item = tier_item(two, 1)
    two.resolve_review(item, decision="irrelevant", reviewer="ana")
    row = two.get_review(item)
    decisions = two.review_decisions([item])[item]
    assert row["decision"] is None and row["reviewer"] is None and row["note"] is None
    assert visible_decisions(row, decisions, "ben") == []
    assert visible_decisions(row, decisions, None) == []
    assert [x["reviewer"] for x in visible_decisions(row, decisions, "ana")] == ["ana"]
    for listed in (two.list_reviews(), two.review_summaries()):
        (shown,) = listed
        assert shown["decision"] is None and shown["decisions_made"] == 1
    two.resolve_review(item, decision=TIERS[0], reviewer="ben")
    row = two.get_review(item)
    assert row["status"] == "disputed"
    every = two.review_decisions([item])[item]
    assert len(visible_decisions(row, every, "cy")) == 2  # no longer pending: open to all


def test_claims_skip_what_a_reviewer_decided_and_the_next_reviewer_gets_it(two: SqlStore) -> None:
    first, second = tier_item(two, 1), tier_item(two, 2)
    claimed = two.claim_review("ana")
    assert claimed and claimed["id"] == first
    two.resolve_review(first, decision="irrelevant", reviewer="ana")
    again = two.claim_review("ana")
    assert again and again["id"] == second  # not the item ana decided
    other = two.claim_review("ben")
    assert other and other["id"] == first  # the lease ended with ana's decision
    two.release_review(second, "ana")
    with pytest.raises(ReviewConflict, match="ana has decided review item"):
        two.claim_item(first, "ana")


def test_one_decision_items_behave_as_before(url: str) -> None:
    store = open_store(url, review=ReviewSettings())
    item = tier_item(store, 1)
    done = store.resolve_review(item, decision="irrelevant", reviewer="ana", note="n")
    assert (done["status"], done["reviewer"], done["note"]) == ("resolved", "ana", "n")
    anonymous = store.resolve_review(tier_item(store, 2), decision="accept")
    assert anonymous["status"] == "resolved" and anonymous["reviewer"] is None
    store.close()


# ---------------------------------------------------------------------------- assignment


def test_an_assigned_item_is_claimed_and_decided_by_its_assignee_alone(url: str) -> None:
    store = open_store(url, review=ReviewSettings())
    free, mine = tier_item(store, 1), tier_item(store, 2)
    store.assign_review(mine, "ana")
    # ben is never given ana's item, first or later
    got = store.claim_review("ben", lease_s=600)
    assert got and got["id"] == free
    assert store.claim_review("ben") is None
    for act in (
        lambda: store.claim_item(mine, "ben"),
        lambda: store.resolve_review(mine, decision="irrelevant", reviewer="ben"),
        lambda: store.resolve_review(mine, decision="irrelevant"),
    ):
        with pytest.raises(ReviewConflict, match="assigned to ana"):
            act()
    assert store.get_review(mine)["status"] == "pending"
    # ana is given her assigned item before an older free one
    store.release_review(free, "ben")
    first = store.claim_review("ana")
    assert first and first["id"] == mine
    # unassigned, it is anybody's again; assigning it away ends ana's lease
    store.assign_review(mine, None)
    assert store.claim_item(mine, "ana")["lease_holder"] == "ana"
    moved = store.assign_review(mine, "ben")
    assert (moved["assignee"], moved["lease_holder"]) == ("ben", None)
    assert store.resolve_review(mine, decision="irrelevant", reviewer="ben")["status"] == "resolved"
    with pytest.raises(ReviewConflict, match="already resolved"):
        store.assign_review(mine, "cy")
    assert [r["id"] for r in store.list_reviews(status=None, assignee="ben")] == [mine]
    assert [r["id"] for r in store.list_reviews(status=None, assignee="")] == [free]
    store.close()


def test_an_assignee_who_decided_hands_the_item_on(two: SqlStore) -> None:
    item = tier_item(two, 1)
    two.assign_review(item, "ana")
    assert two.claim_review("ben") is None
    after = two.resolve_review(item, decision="irrelevant", reviewer="ana")
    assert (after["status"], after["assignee"]) == ("pending", None)
    got = two.claim_review("ben")
    assert got and got["id"] == item
    with pytest.raises(ReviewConflict, match="ana has decided"):
        two.assign_review(item, "ana")  # her second decision would not be independent


def test_an_assignment_rule_applies_when_the_item_is_queued(url: str) -> None:
    settings = ReviewSettings(rules=[ReviewRule(risk="high", decisions=2, assign="ana")])
    store = open_store(url, review=settings)
    item = store.get_review(tier_item(store, 1, risk="high"))
    assert (item["assignee"], item["decisions_required"]) == ("ana", 2)
    assert store.claim_review("ben") is None
    claimed = store.claim_review("ana")
    assert claimed and claimed["id"] == item["id"]
    store.close()


# ---------------------------------------------------------------------------- concurrency

DECIDER = """
    import json, sys, time
    from evidex.errors import ReviewConflict
    from evidex.store import open_store
    url, who, ids, start = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
    store = open_store(url)
    while time.time() < start:
        time.sleep(0.001)
    for item_id in ids:
        try:
            store.resolve_review(item_id, decision=sys.argv[5], reviewer=who)
        except ReviewConflict:
            pass
    print(json.dumps("done"))
"""


def test_three_processes_deciding_at_once_leave_no_item_short(url: str) -> None:
    """Three reviewers decide the same 60 items (two decisions each) at the same moment: the
    first two of each item count, the third gets a conflict (caught per item), and every item
    ends resolved or disputed with exactly two decisions, never pending with two."""
    store = open_store(url, review=TWO)
    ids = [tier_item(store, n) for n in range(60)]
    start = str(time.time() + 3)
    votes = {"ana": "accept", "ben": TIERS[0], "cy": "irrelevant"}
    _results([_python(DECIDER, url, who, json.dumps(ids), start, v) for who, v in votes.items()])
    every = store.review_decisions(ids)
    for item in ids:
        row = store.get_review(item)
        decided = [x["reviewer"] for x in every[item]]
        assert len(decided) == 2 and row["decisions_made"] == 2, (item, decided)
        agree = set(decided) == {"ana", "ben"}
        assert row["status"] == ("resolved" if agree else "disputed"), (item, decided)
    store.close()


# ---------------------------------------------------------------------------- counts, export


def test_each_decision_counts_for_its_reviewer_today(two: SqlStore) -> None:
    a, b = tier_item(two, 1), tier_item(two, 2)
    two.resolve_review(a, decision="irrelevant", reviewer="ana")
    two.resolve_review(a, decision=TIERS[0], reviewer="ben")
    two.resolve_review(b, decision="irrelevant", reviewer="ana")
    two.adjudicate_review(a, decision="irrelevant", reviewer="lead")
    assert two.resolved_by_reviewer(now().replace(hour=0, minute=0)) == {
        "ana": 2,
        "ben": 1,
        "lead": 1,
    }


def test_the_golden_export_takes_the_adjudicated_label_and_counts_disputes(two: SqlStore) -> None:
    from evidex.evaluate.review_export import export_reviews

    agreed, settled, open_ = (tier_item(two, n) for n in range(3))
    for item, votes in ((agreed, ("accept", TIERS[0])), (settled, ("accept", "irrelevant"))):
        two.resolve_review(item, decision=votes[0], reviewer="ana")
        two.resolve_review(item, decision=votes[1], reviewer="ben")
    two.resolve_review(open_, decision="accept", reviewer="ana")
    two.resolve_review(open_, decision=TIERS[2], reviewer="ben")
    two.adjudicate_review(settled, decision=TIERS[1], reviewer="lead")
    result = export_reviews(two.list_reviews(status=None), "tier")
    assert sorted((r.passage_id, r.tier) for r in result.records) == [
        ("p0", TIERS[0]),
        ("p1", TIERS[1]),
    ]
    assert result.disputed == [open_]


# ---------------------------------------------------------------------------- migration


def test_a_version_4_database_keeps_its_decisions(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database made by the migrations before this one (the columns and the table it adds
    taken away again, as a version-4 database never had them) with a resolved and a pending
    item: opened now, the resolved decision is its reviewer's row and the pending item opens
    for decisions."""
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:4])
    old = open_store(url)
    with old.engine.begin() as conn:
        for column in ("decisions_required", "decisions_made", "assignee"):
            conn.exec_driver_sql(f"ALTER TABLE review_queue DROP COLUMN {column}")
        conn.exec_driver_sql("DROP TABLE IF EXISTS review_decisions")
        rows = [("resolved", "irrelevant", "ana", "k1", "n1"), ("pending", None, None, "k2", None)]
        for status, decision, reviewer, key, note in rows:
            conn.execute(
                sa.text(
                    "INSERT INTO review_queue (job, status, reason, risk, run_id, batch_id, "
                    "passage_ids, payload, decision, reviewer, note, created_at, resolved_at, "
                    "dedup_key) VALUES ('tier', :status, 'r', 'low', 'r', '', '[\"p1\"]', "
                    "'{}', :decision, :reviewer, :note, :at, :resolved, :key)"
                ),
                {
                    "status": status,
                    "decision": decision,
                    "reviewer": reviewer,
                    "note": note,
                    "at": now(),
                    "resolved": now() if decision else None,
                    "key": key,
                },
            )
    assert old.schema_version() == 4
    old.close()
    monkeypatch.undo()
    store = open_store(url, review=ReviewSettings())
    assert store.schema_version() == schema.MIGRATIONS[-1][0]
    resolved, pending = store.list_reviews(status=None)
    assert (resolved["decisions_made"], resolved["decisions_required"]) == (1, 1)
    assert (pending["decisions_made"], pending["assignee"]) == (0, None)
    (kept,) = store.review_decisions([resolved["id"]])[resolved["id"]]
    assert (kept["reviewer"], kept["decision"], kept["kind"], kept["note"]) == (
        "ana",
        "irrelevant",
        "review",
        "n1",
    )
    done = store.resolve_review(pending["id"], decision="irrelevant", reviewer="ben")
    assert done["status"] == "resolved"
    assert store.migrate() == []
    store.close()


# ---------------------------------------------------------------------------- the API, the CLI


def test_the_api_hides_decisions_until_you_decided_and_admins_assign_and_adjudicate(
    tmp_path: Path,
) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from evidex.service import create_app

    store = open_store(f"sqlite:///{tmp_path / 'api.db'}", review=TWO)
    item, other = tier_item(store, 1), tier_item(store, 2)
    keys = {who: store.create_key(role, who)[1] for who, role in
            (("ana", "reviewer"), ("ben", "reviewer"), ("lead", "admin"))}  # fmt: skip
    client = TestClient(create_app(store, allowed_hosts=["testserver"]))

    def call(who: str, method: str, path: str, **body: Any) -> Any:
        headers = {"Authorization": f"Bearer {keys[who]}"}
        return client.request(
            method, path, headers=headers, json=body if method == "POST" else None
        )

    done = call("ana", "POST", f"/review/{item}/resolve", decision="accept", note="judge ok")
    assert done.status_code == 200, done.text
    assert [x["reviewer"] for x in done.json()["decisions"]] == ["ana"]
    shown = call("ben", "GET", f"/review/{item}").json()
    assert shown["decisions"] == [] and shown["decisions_made"] == 1
    assert shown["decision"] is None and shown["note"] is None
    listed = call("ben", "GET", "/review").json()
    assert "judge ok" not in json.dumps(listed) and "decisions" not in listed[0]
    assert call("ana", "GET", f"/review/{item}").json()["decisions"][0]["note"] == "judge ok"
    disputed = call("ben", "POST", f"/review/{item}/resolve", decision="irrelevant").json()
    assert disputed["status"] == "disputed" and len(disputed["decisions"]) == 2
    assert [r["id"] for r in call("ben", "GET", "/review?status=disputed").json()] == [item]

    # adjudication and assignment are an admin's
    refused = call("ben", "POST", f"/review/{item}/adjudicate", decision=TIERS[1])
    assert refused.status_code == 403
    settled = call("lead", "POST", f"/review/{item}/adjudicate", decision=TIERS[1], note="bg")
    assert settled.status_code == 200 and settled.json()["decision"] == TIERS[1]
    assert call("lead", "POST", f"/review/{item}/adjudicate", decision=TIERS[1]).status_code == 409
    assert call("ana", "POST", f"/review/{other}/assign", assignee="ben").status_code == 403
    assigned = call("lead", "POST", f"/review/{other}/assign", assignee="ben")
    assert assigned.status_code == 200 and assigned.json()["assignee"] == "ben"
    assert call("ana", "POST", "/review/claim", job="tier").json() is None
    assert call("ben", "POST", "/review/claim").json()["id"] == other
    assert [r["id"] for r in call("ana", "GET", "/review?assignee=ben").json()] == [other]
    blocked = call("ana", "POST", f"/review/{other}/resolve", decision="irrelevant")
    assert blocked.status_code == 409 and "by ben" in blocked.json()["detail"]
    store.close()


def test_the_cli_assigns_adjudicates_and_says_how_many_decisions_wait(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = f"sqlite:///{tmp_path / 'cli.db'}"
    store = open_store(db, review=TWO)
    item, other = tier_item(store, 1), tier_item(store, 2)
    store.close()
    evidex = str(Path(sys.executable).with_name("evidex"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [evidex, "review", *args, "--db", db], capture_output=True, text=True, timeout=60
        )
        done.stderr = " ".join(done.stderr.split())  # as one line, however rich wrapped it
        return done

    first = run("resolve", str(item), "-d", "accept", "--reviewer", "ana")
    assert first.returncode == 0 and "(1 of 2); it waits for 1 more decision" in first.stderr
    hidden = json.loads(run("show", str(item), "--json", "--reviewer", "ben").stdout)
    assert hidden["decisions"] == []
    mine = json.loads(run("show", str(item), "--json", "--reviewer", "ana").stdout)
    assert [x["decision"] for x in mine["decisions"]] == ["accept"]
    second = run("resolve", str(item), "-d", "irrelevant", "--reviewer", "ben")
    assert second.returncode == 0 and "waits for an adjudication" in second.stderr
    out = tmp_path / "golden.jsonl"
    export = run("export", "--job", "tier", "--output", str(out))
    assert export.returncode == 0 and "left out 1 item whose reviewers disagree" in export.stderr
    assert out.read_text() == ""
    settled = run("adjudicate", str(item), "-d", TIERS[1], "--reviewer", "lead")
    assert settled.returncode == 0 and "adjudicated review item" in settled.stderr
    assert run("adjudicate", str(item), "-d", TIERS[1]).returncode == 2
    run("export", "--job", "tier", "--output", str(out))
    assert json.loads(out.read_text())["tier"] == TIERS[1]
    assert run("assign", str(other), "--to", "ben").returncode == 0
    listed = json.loads(run("list", "--assignee", "ben", "--json").stdout)
    assert [r["id"] for r in listed] == [other]
    taken = run("resolve", str(other), "-d", "irrelevant", "--reviewer", "ana")
    assert taken.returncode == 2 and "assigned to ben" in taken.stderr
    assert run("assign", str(other), "--clear").returncode == 0
    assert run("assign", str(other)).returncode == 2  # --to or --clear
    assert run("resolve", str(other), "-d", "irrelevant", "--reviewer", "ana").returncode == 0


def test_reviewer_agreement_counts_and_pairs_first_with_second(two: SqlStore) -> None:
    from evidex.service._ui_agreement import reviewer_agreement

    ds, cr, ir = TIERS
    votes = [("accept", ds), (ds, ds), (ds, ir), (ir, cr)]
    ids = []
    for n, (first, second) in enumerate(votes):
        ids.append(tier_item(two, n))
        two.resolve_review(ids[-1], decision=first, reviewer="ana")
        two.resolve_review(ids[-1], decision=second, reviewer="ben")
    two.adjudicate_review(ids[3], decision=cr, reviewer="lead")
    tier_item(two, 9)  # one decision only: not measured
    (row,) = reviewer_agreement(two.decided_items())
    assert (row.job, row.items, row.agreed, row.disputed, row.adjudicated) == ("tier", 4, 2, 1, 1)
    assert row.pairs == 4
    # pairs (ana, ben): (ds, ds), (ds, ds), (ds, ir), (ir, cr)
    observed = 2 / 4
    expected = (3 * 2 + 1 * 1 + 0 * 1) / 4**2  # ana: ds 3, ir 1; ben: ds 2, ir 1, cr 1
    assert row.kappa == pytest.approx((observed - expected) / (1 - expected))
    assert row.low is not None and row.high is not None and row.low <= row.high


def test_the_readmes_review_commands_run_as_written(tmp_path: Path) -> None:
    """The README's commands of several reviewers, over a queue where item 7 needs two
    decisions and its two reviewers disagreed."""
    import shlex
    import subprocess
    import sys

    from tests.test_readme import README, _cli_commands

    words = ("assign", "adjudicate", "--status disputed")
    commands = [
        c for c in _cli_commands() if c.startswith("evidex review ") and any(w in c for w in words)
    ]
    assert len(commands) == 4, commands
    db = f"sqlite:///{tmp_path / 'readme.db'}"
    store = open_store(db, review=TWO)
    ids = [tier_item(store, n) for n in range(7)]
    store.resolve_review(ids[-1], decision="accept", reviewer="bo")
    store.resolve_review(ids[-1], decision="irrelevant", reviewer="cy")
    assert ids[-1] == 7 and store.get_review(7)["status"] == "disputed"
    store.close()
    evidex = str(Path(sys.executable).with_name("evidex"))
    for command in sorted(commands, key=lambda c: "adjudicate" in c):  # adjudicate last
        line = command.replace("evidex", shlex.quote(evidex), 1) + f" --db {db}"
        done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (command, done.stderr)
    settled = open_store(db).get_review(7)
    assert (settled["status"], settled["decision"]) == ("resolved", TIERS[1])

    import re

    from evidex.config import load_settings

    [table] = [b for b in re.findall(r"```toml\n(.*?)```", README, re.DOTALL) if "[review]" in b]
    (tmp_path / "config.toml").write_text(table)
    review = load_settings(tmp_path / "config.toml").review
    assert review.route("tier", "high", "high risk: x") == (2, None)
    assert review.route("audit", "low", "fallback after 3 attempt(s): bad") == (1, "ana")
