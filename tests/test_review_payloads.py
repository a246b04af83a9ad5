"""The review side of each job, as its definition declares it: typed payloads that round-trip,
decisions refused with the allowed values named, every job's decisions exported as golden rows
its evaluator reads, items of the old payload shapes still opening, and one review item per
audit input however many of its steps fell back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidex.errors import InputError
from evidex.evaluate.golden import GOLDEN_TYPES, load_golden, write_jsonl
from evidex.evaluate.review_export import export_reviews
from evidex.harness.ports import ReviewRequest
from evidex.jobs import definition, review_kind
from evidex.store import SqlStore, open_store
from tests.review_items import raise_items

JOBS = ["tier", "rerank", "classify", "audit"]
"""The jobs whose items :func:`raise_items` raises (a job added later declares its own)."""


@pytest.fixture(scope="module")
def raised(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqlStore, dict[tuple[str, str], int]]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('rv') / 'review.db'}")
    yield store, raise_items(store)
    store.close()


@pytest.mark.parametrize("route", ["fallback", "routed"])
@pytest.mark.parametrize("job", JOBS)
def test_each_payload_reads_as_its_jobs_model_and_round_trips(
    raised: tuple[SqlStore, dict[tuple[str, str], int]], job: str, route: str
) -> None:
    store, items = raised
    item = store.get_review(items[job, route])
    kind = definition(job).review
    payload = kind.read(item["payload"])
    assert type(payload) is kind.payload
    again = kind.read(payload.model_dump(mode="json", exclude_unset=True))
    assert again == payload
    assert payload.passages, "the reviewer reads the passages the judge read"
    values = payload.judge_values()
    assert values and all(v and v != "None" for v in values), values


def test_an_item_of_a_job_nobody_registered_takes_accept_or_reject() -> None:
    assert review_kind("summarise").check({"payload": {}}, " Accept ", limit=100) == "accept"
    with pytest.raises(InputError, match="allowed: accept, reject"):
        review_kind("summarise").check({"payload": {}}, "maybe", limit=100)


@pytest.mark.parametrize(
    ("job", "route", "bad", "named"),
    [
        ("tier", "routed", "relevant", "directly-supporting, contextually-relevant"),
        ("rerank", "fallback", '["nope"]', "who-2023, nih-fact, blog-sun"),
        ("classify", "routed", "CANCEL", "REFUND, SHIPPING, OTHER, accept, reject"),
        ("audit", "routed", '{"claim-1": "true"}', "fully_supported, partially_supported"),
    ],
)
def test_a_decision_is_refused_with_the_allowed_values_named(
    raised: tuple[SqlStore, dict[tuple[str, str], int]], job: str, route: str, bad: str, named: str
) -> None:
    store, items = raised
    with pytest.raises(InputError) as info:
        store.resolve_review(items[job, route], decision=bad)
    assert named in str(info.value)
    assert store.get_review(items[job, route])["status"] == "pending"


DECISIONS = {
    ("tier", "routed"): "accept",
    ("tier", "fallback"): json.dumps(
        {"who-2023": "directly-supporting", "nih-fact": "irrelevant", "blog-sun": "irrelevant"}
    ),
    ("rerank", "routed"): "accept",
    ("rerank", "fallback"): "who-2023, nih-fact, blog-sun",
    ("classify", "routed"): "accept",
    ("classify", "fallback"): "SHIPPING",
    ("audit", "routed"): json.dumps({"claim-1": "fully_supported", "claim-2": "unsupported"}),
    ("audit", "fallback"): "unsupported",
}


@pytest.mark.parametrize("job", JOBS)
def test_every_jobs_decisions_become_golden_rows_its_evaluator_reads(
    tmp_path: Path, job: str
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'export.db'}")
    items = raise_items(store)
    for route in ("fallback", "routed"):
        store.resolve_review(items[job, route], decision=DECISIONS[job, route])
    result = export_reviews(store.list_reviews(status="resolved", job=job), job)
    assert result.skipped == []
    assert len(result.records) >= 2
    assert {type(r) for r in result.records} == {GOLDEN_TYPES[job]}
    out = tmp_path / "golden.jsonl"
    write_jsonl(out, result.records)
    assert len(load_golden(out, job)) == len(result.records)
    store.close()


def test_the_exported_rows_say_what_the_reviewer_decided(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'export.db'}")
    items = raise_items(store)
    for key, decision in DECISIONS.items():
        store.resolve_review(items[key], decision=decision)
    resolved = store.list_reviews(status="resolved")
    (accepted, ranking) = sorted(export_reviews(resolved, "rerank").records, key=lambda r: r.query)
    assert ranking.grades == {"who-2023": 3, "nih-fact": 2, "blog-sun": 1}
    assert accepted.grades == {"nih-fact": 2, "who-2023": 1}  # the judge's top 2, accepted
    audit = {r.answer: r for r in export_reviews(resolved, "audit").records}
    assert all(
        c.classification == "unsupported"
        for r in audit.values()
        for c in r.claims
        if r.answer.count(".") == 3
    )
    classify = sorted(r.labels[0] for r in export_reviews(resolved, "classify").records)
    assert classify == ["REFUND", "SHIPPING"]
    store.close()


# ---------------------------------------------------------------------------- old items

OLD_AUDIT_FALLBACK = {
    # what the harness stored for an audit claim batch before payloads were typed
    "query": "Tell me about Acme.",
    "step": "audit.classify",
    "errors": [["invalid JSON"], ["invalid JSON"]],
    "last_raw_output": "not JSON",
    "fallback": {
        "claims": [
            {
                "claim_id": "claim-1",
                "claim_text": "Acme Corp was founded in 2012.",
                "start": 0,
                "end": 30,
                "classification": "unsupported",
                "explanation": "Fallback: no grade.",
                "source": "fallback",
            }
        ]
    },
    "answer_id": "answer-1",
    "claims": [
        {
            "claim_id": "claim-1",
            "claim_text": "Acme Corp was founded in 2012.",
            "start": 0,
            "end": 30,
        }
    ],
    "passages": [
        {"passage_id": "s1", "text": "Acme was founded in 2012.", "title": None, "url": None}
    ],
}
OLD_TIER_FALLBACK = {
    "query": "what does aspirin do?",
    "step": "tier",
    "errors": [["invalid JSON"]],
    "last_raw_output": "nope",
    "fallback": {
        "classifications": [
            {
                "passage_id": "p1",
                "tier": "contextually-relevant",
                "justification": "Fallback.",
                "source": "fallback",
            }
        ]
    },
    "tiers": ["directly-supporting", "contextually-relevant", "tangentially-related", "irrelevant"],
    "passages": [
        {"passage_id": "p1", "text": "Aspirin thins the blood.", "title": None, "url": None}
    ],
}


def test_an_old_audit_fallback_reads_its_question_steps_and_grades() -> None:
    payload = definition("audit").review.read(OLD_AUDIT_FALLBACK)
    assert payload.question == "Tell me about Acme."
    assert [(c.claim_id, c.grade, c.fell_back) for c in payload.claims] == [
        ("claim-1", "unsupported", True)
    ]
    assert [s.step for s in payload.steps] == ["audit.classify"]
    assert payload.steps[0].errors == [["invalid JSON"], ["invalid JSON"]]


def test_old_items_still_open_and_export(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from evidex.service import create_app
    from tests.test_ui import logged_in

    store = open_store(f"sqlite:///{tmp_path / 'old.db'}")
    audit_id = store.add_review(
        ReviewRequest(
            job="audit",
            reason="fallback after 2 attempt(s): invalid JSON",
            run_id="old",
            passage_ids=["s1"],
            payload=OLD_AUDIT_FALLBACK,
        )
    )
    tier_id = store.add_review(
        ReviewRequest(
            job="tier",
            reason="fallback after 1 attempt(s): invalid JSON",
            run_id="old",
            passage_ids=["p1"],
            payload=OLD_TIER_FALLBACK,
        )
    )
    client = TestClient(create_app(store, allowed_hosts=["testserver"]))
    logged_in(client, store)
    page = client.get(f"/ui/item/{audit_id}").text
    assert "Tell me about Acme." in page and "was not stored with this item" in page
    assert '<span class="grade">unsupported</span>' in page and ">None<" not in page
    page = client.get(f"/ui/item/{tier_id}").text
    assert "what does aspirin do?" in page and "contextually-relevant" in page
    assert ">None<" not in page

    store.resolve_review(audit_id, decision="unsupported")
    store.resolve_review(tier_id, decision="irrelevant")
    resolved = store.list_reviews(status="resolved")
    (tier,) = export_reviews(resolved, "tier").records
    assert (tier.query, tier.passage_id, tier.tier) == ("what does aspirin do?", "p1", "irrelevant")
    audit = export_reviews(resolved, "audit")
    assert audit.records == [] and "has no answer" in audit.skipped[0][1]
    store.close()


# ---------------------------------------------------------------------------- one item per input


def test_one_audit_answer_whose_replies_never_validate_is_one_item(
    raised: tuple[SqlStore, dict[tuple[str, str], int]],
) -> None:
    store, items = raised
    item_id = items["audit", "fallback"]
    (item,) = [i for i in store.list_reviews(job="audit") if i["reason"].startswith("fallback")]
    assert item["id"] == item_id
    payload = definition("audit").review.read(item["payload"])
    # the one-pass step, then each claim its sentences became, asked alone once their batch
    # failed (a batch that fails is split before anything falls back)
    steps = [s.step for s in payload.steps]
    assert steps[0] == "audit" and set(steps[1:]) == {"audit.classify"} and len(steps) > 2
    assert all(len(s.errors) == 2 for s in payload.steps)  # each step's attempts
    assert payload.answer and payload.question and payload.claims
    assert {c.grade for c in payload.claims} == {"unsupported"}
    fell_back = [r for r in store.audit_rows(run_id=item["run_id"]) if r["status"] == "fallback"]
    assert [r["step"] for r in fell_back] == steps  # every row kept
    assert {r["detail"]["review_item_id"] for r in fell_back} == {item_id}
