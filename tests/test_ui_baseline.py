"""A baseline run pinned on the agreement page, in process: two tier runs of scripted judges
over the small golden set of :mod:`tests.evalkit` (the marker judge, and one that grades three
pairs otherwise) written below the service's reports folder (``EVIDEX_REPORTS``).

An admin pins the older run; the page then shows both runs, each metric's two figures, the
difference with the paired interval and verdict of :func:`evidex.evaluate.compare_reports`, and
the three changed pairs. A reviewer sees the comparison and no form; a client key and a
reviewer cannot pin; a form without its CSRF token, or naming a file that is no known report,
pins nothing; pinning another run replaces the pin, and clearing it leaves none, each kept in
the store's record of pins.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from evidex.evaluate.compare import compare_reports
from evidex.evaluate.run import evaluate, read_report
from evidex.service import create_app
from evidex.store import SqlStore, open_store
from tests.evalkit import AnsweringJudge, MarkerJudge, write_golden
from tests.test_eval_compare import regraded_reply
from tests.test_ui import _csrf, login


def write_runs(reports: Path, store: SqlStore) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two tier runs below ``reports``: ``eval-tier-v1`` (the marker judge, finished first)
    and ``eval-tier-v2`` (the regraded judge, finished a month later)."""
    golden = write_golden(reports.parent / "golden.jsonl")
    judges = {
        "eval-tier-v1": MarkerJudge(),
        "eval-tier-v2": AnsweringJudge(regraded_reply, judge_id="scripted-regraded"),
    }
    for (name, judge), month in zip(judges.items(), ("01", "02"), strict=True):
        evaluate("tier", golden, judge=judge, store=store, out_dir=reports / name)
        path = reports / name / "report.json"
        report = json.loads(path.read_text())
        report["run"]["finished"] = f"2025-{month}-01T00:00:00+00:00"
        path.write_text(json.dumps(report))
    return read_report(reports / "eval-tier-v1"), read_report(reports / "eval-tier-v2")


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TestClient, SqlStore, tuple[dict[str, Any], dict[str, Any]]]]:
    store = open_store(f"sqlite:///{tmp_path / 'ui.db'}")
    runs = write_runs(tmp_path / "runs", store)
    monkeypatch.setenv("EVIDEX_REPORTS", str(tmp_path / "runs"))
    yield TestClient(create_app(store, allowed_hosts=["testserver"])), store, runs
    store.close()


def as_role(client: TestClient, store: SqlStore, role: str, name: str) -> str:
    _, secret = store.create_key(role, name)
    assert login(client, secret).status_code == 303
    return secret


def pin(client: TestClient, report: str, csrf: str | None = None) -> Any:
    page = client.get("/ui/agreement").text
    return client.post(
        "/ui/agreement/baseline",
        data={"report": report, "csrf": _csrf(page) if csrf is None else csrf},
        follow_redirects=False,
    )


def section(page: str, job: str) -> str:
    found = re.search(rf'<section class="baseline" data-job="{job}">(.*?)</section>', page, re.S)
    assert found, page
    return found.group(1)


def run_row(html: str, label: str) -> str:
    """The row of the runs table for the ``pinned`` or the ``newest`` run."""
    found = re.search(rf'<tr class="run-{label}">(.*?)</tr>', html, re.S)
    assert found, html
    return found.group(1)


def cell_of(row: str, column: str) -> str:
    """The text of the cell of ``row`` (a row's HTML) whose class names ``column``."""
    found = re.search(rf'class="[^"]*\b{column}\b[^"]*"[^>]*>(.*?)</td>', row, re.S)
    assert found, row
    return found.group(1).strip()


def cell(html: str, measure: str, column: str) -> str:
    row = re.search(rf'<tr data-measure="{re.escape(measure)}">(.*?)</tr>', html, re.S)
    assert row, html
    return cell_of(row.group(1), column)


def test_the_page_shows_the_newest_run_against_the_pinned_one(world: Any) -> None:
    client, store, (v1, v2) = world
    as_role(client, store, "admin", "ada")
    page = client.get("/ui/agreement").text
    assert 'id="no-baseline"' in page
    options = re.findall(r'<option value="([^"]+)">', page)
    assert options == ["eval-tier-v2/report.json", "eval-tier-v1/report.json"]  # newest first

    answer = pin(client, "eval-tier-v1/report.json")
    assert answer.status_code == 303
    assert answer.headers["location"].endswith("#baseline")
    page = client.get(answer.headers["location"]).text
    assert "Pinned eval-tier-v1/report.json as the tier baseline." in page
    tier = section(page, "tier")
    pinned = run_row(tier, "pinned")
    newest = run_row(tier, "newest")
    assert "eval-tier-v1/report.json" in pinned and ">scripted<" in pinned
    assert "eval-tier-v2/report.json" in newest and ">scripted-regraded<" in newest
    assert "Pinned by ada on" in tier

    # the figures, interval and verdict are compare_reports' (newest against pinned), each
    # run's figure its own report's (the two hold the same pairs)
    comparison = compare_reports(v1, v2)
    for row in comparison["metrics"]:
        measure = row["measure"]
        if row["baseline"] == row["baseline"]:  # a defined figure (not NaN)
            assert cell(tier, measure, "col-pinned") == f"{v1['metrics'][measure]:.3f}"
            assert cell(tier, measure, "col-newest") == f"{v2['metrics'][measure]:.3f}"
            assert cell(tier, measure, "col-difference") == f"{row['difference']:+.3f}"
        if row["low"] == row["low"]:
            interval = f"{row['low']:+.3f} to {row['high']:+.3f}"
            assert cell(tier, measure, "col-interval") == interval
            assert row["low"] <= row["difference"] <= row["high"]
        assert cell(tier, measure, "verdict") == row["verdict"]
    assert cell(tier, "accuracy", "verdict") == "not significant"  # 12 pairs cannot tell

    # the changed pairs, the worse first, with both judgments (the second judge grades
    # q1p3, q1p4 and q2p3 otherwise; a pair the first judge graded so already is no change)
    changed = comparison["changed"]
    assert changed and {c["key"] for c in changed} <= {"q1 / q1p3", "q1 / q1p4", "q2 / q2p3"}
    assert f"Changed judgments: {len(changed)} of 12 pairs" in tier
    assert re.findall(r'<tr data-key="([^"]+)">', tier) == [c["key"] for c in changed]
    for change in changed:
        key = re.escape(change["key"])
        html = re.search(rf'<tr data-key="{key}">(.*?)</tr>', tier, re.S).group(1)  # type: ignore[union-attr]
        assert cell_of(html, "was").startswith(change["baseline"]["judgment"])
        assert cell_of(html, "now").startswith(change["report"]["judgment"])
        assert cell_of(html, f"effect-{change['effect']}") == change["effect"]
    assert changed[0]["baseline"]["judgment"] != changed[0]["report"]["judgment"]


def test_a_reviewer_reads_the_comparison_and_cannot_pin(world: Any) -> None:
    client, store, (v1, _) = world
    store.pin_baseline("tier", v1, name="eval-tier-v1/report.json", digest="d", by="ada")
    as_role(client, store, "reviewer", "rey")
    page = client.get("/ui/agreement").text
    assert 'action="/ui/agreement/baseline"' not in page  # no pin form
    assert "/ui/agreement/baseline/clear" not in page
    assert re.search(r"Changed judgments: \d+ of 12 pairs", section(page, "tier"))
    answer = client.post(
        "/ui/agreement/baseline",
        data={"report": "eval-tier-v2/report.json", "csrf": _csrf(page)},
        follow_redirects=False,
    )
    assert answer.status_code == 403 and "admin" in answer.text
    cleared = client.post(
        "/ui/agreement/baseline/clear",
        data={"job": "tier", "csrf": _csrf(page)},
        follow_redirects=False,
    )
    assert cleared.status_code == 403
    assert store.baseline("tier").name == "eval-tier-v1/report.json"  # type: ignore[union-attr]


def test_a_client_key_cannot_pin(world: Any) -> None:
    client, store, _ = world
    _, secret = store.create_key("client", "app")
    assert login(client, secret).status_code == 403  # no UI session for a client key
    answer = client.post(
        "/ui/agreement/baseline",
        data={"report": "eval-tier-v1/report.json", "csrf": "x"},
        headers={"Authorization": f"Bearer {secret}"},
        follow_redirects=False,
    )
    # a key in a header is no UI login (the pages take a session cookie): off to the login
    # page, where a client key is refused
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/ui/login?")
    assert store.baselines() == {}


def test_no_pin_without_csrf_or_outside_the_known_reports(world: Any) -> None:
    client, store, _ = world
    as_role(client, store, "admin", "ada")
    assert pin(client, "eval-tier-v1/report.json", csrf="wrong").status_code == 403
    for name in ("../ui.db", "eval-tier-v1/../../golden.jsonl", "/etc/passwd"):
        answer = pin(client, name)
        assert answer.status_code == 404 and "no comparable report" in answer.text
    assert store.baselines() == {}


def test_replacing_and_clearing_the_pin(world: Any) -> None:
    client, store, (v1, v2) = world
    as_role(client, store, "admin", "ada")
    assert pin(client, "eval-tier-v1/report.json").status_code == 303
    assert pin(client, "eval-tier-v2/report.json").status_code == 303
    page = client.get("/ui/agreement").text
    tier = section(page, "tier")
    # the newest run is the pinned file itself: the other one is compared with it
    assert "eval-tier-v2/report.json" in run_row(tier, "pinned")
    assert "eval-tier-v1/report.json" in run_row(tier, "newest")
    back = compare_reports(v2, v1)["metrics"]
    accuracy = next(r for r in back if r["measure"] == "accuracy")
    assert cell(tier, "accuracy", "col-difference") == f"{accuracy['difference']:+.3f}"

    answer = client.post(
        "/ui/agreement/baseline/clear",
        data={"job": "tier", "csrf": _csrf(page)},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    page = client.get(answer.headers["location"]).text
    assert "Cleared the tier baseline." in page and 'id="no-baseline"' in page
    assert store.baseline("tier") is None
    history = [(p.name, p.ended, p.ended_by) for p in store.baseline_history("tier")]
    assert history == [
        ("eval-tier-v2/report.json", "cleared", "ada"),
        ("eval-tier-v1/report.json", "replaced", "ada"),
    ]
