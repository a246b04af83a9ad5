"""``evidex demo``: the bundled example, the five-step pipeline, the report, the JSON, and the
partial run without the llm extra. Fast tests replace the judges (a scripted judge that answers
each job as the example's author would, and the loopback OpenAI-compatible server); one slow
test runs the real embedded judges end to end."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evidex.cli import main
from evidex.cli.demo import DEMO_BUDGET, DemoExample, load_demo, run_demo
from evidex.errors import ConfigError
from evidex.judging import ClaimText, JudgeRequest
from evidex.store import open_store
from evidex.types import DEFAULT_TIERS
from tests.fake_openai_server import FakeOpenAIServer, Reply, serve
from tests.scripted import ScriptedJudge, tier_reply

DEMO = load_demo()
SIGKILL_SENTENCE = "Any container still running when the period ends is sent SIGKILL."
LEVELS = {"fully_supported", "partially_supported", "inferred", "unsupported"}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- the example


def test_example_is_sound() -> None:
    """Fifteen passages in every tier with one whitespace-only copy, a 5-7 sentence answer made of
    its claims with three planted ones (one contradicted), and a classify case over known ids."""
    ids = [p.passage_id for p in DEMO.passages]
    assert len(ids) == 15 == len(set(ids))
    assert set(DEMO.expected_tiers) == set(ids)
    assert sorted(set(DEMO.expected_tiers.values())) == sorted(DEFAULT_TIERS.names)
    assert sorted(p.rank for p in DEMO.passages) == list(range(1, 16))
    texts = [" ".join(p.text.split()) for p in DEMO.passages]
    assert len(texts) - len(set(texts)) == 1  # the mirrored copy

    answer = DEMO.answer
    assert answer.text == " ".join(c.claim for c in answer.claims)
    assert 5 <= len(answer.claims) <= 7
    unsupported = [c for c in answer.claims if c.expected == "unsupported"]
    assert len(unsupported) >= 3 and sum(c.contradicted for c in answer.claims) == 1
    assert all(c.expected == "unsupported" for c in answer.claims if c.contradicted)
    assert answer.expected_decision == "block"  # a contradiction blocks under the default policy
    for claim in answer.claims:
        assert set(claim.evidence) <= set(ids)

    case = DEMO.classify
    assert set(case.passage_ids) <= set(ids)
    assert set(case.expected_labels) <= set(case.taxonomy.names)


# ---------------------------------------------------------------------------- judges as the author


def as_author(example: DemoExample = DEMO) -> Callable[[JudgeRequest], dict[str, Any]]:
    """A reply for any demo request, built from the request and the author's labels."""
    by_claim = {c.claim: c for c in example.answer.claims}

    def reply(request: JudgeRequest) -> dict[str, Any]:
        payload: Any = request.payload
        if request.job == "rerank":
            order = [p.passage_id for p in sorted(example.passages, key=lambda p: p.rank or 0)]
            return {
                "scores": [
                    {
                        "passage_id": p.passage_id,
                        "relevance_score": 1.0 / (1 + order.index(p.passage_id)),
                        "justification": "by hand",
                    }
                    for p in payload.passages
                ]
            }
        if request.job == "tier":
            overrides = {
                pid: {"tier": tier}
                | ({"key_evidence_snippet": None} if tier == "irrelevant" else {})
                for pid, tier in example.expected_tiers.items()
            }
            return tier_reply(request, **overrides)
        if request.job == "sufficiency":
            return _checked(example, payload)
        if request.job == "audit":
            context = {p.passage_id: p.text for p in payload.passages}
            return {"claims": [_graded(c, by_claim[c.claim_text], context) for c in payload.claims]}
        return {
            "classifications": [
                {
                    "label": example.classify.expected_labels[0],
                    "confidence": 0.9,
                    "supporting_evidence": [
                        {
                            "passage_id": "k8s-termination",
                            "quoted_text": SIGKILL_SENTENCE,
                            "rationale": "Uploads outlive the period.",
                        }
                    ],
                    "counter_evidence": [],
                }
            ],
            "unclassifiable": False,
            "unclassifiable_reason": None,
            "evidence_gaps": [],
        }

    return reply


def _checked(example: DemoExample, payload: Any) -> dict[str, Any]:
    """The author's verdict on a demo question: the example's own is answered by the context,
    the other is not."""
    if payload.query != example.query:
        return {
            "sufficient": False,
            "confidence": 0.9,
            "supporting_passage_ids": [],
            "key_quotes": [],
            "missing": ["what the kubelet reserves"],
        }
    first = payload.passages[0]
    return {
        "sufficient": True,
        "confidence": 0.9,
        "supporting_passage_ids": [first.passage_id],
        "key_quotes": [{"passage_id": first.passage_id, "quoted_text": first.text.split(".")[0]}],
        "missing": [],
    }


def _graded(item: ClaimText, planted: Any, context: dict[str, str]) -> dict[str, Any]:
    cited = [pid for pid in planted.evidence if pid in context]
    level = planted.expected if cited or planted.expected == "unsupported" else "unsupported"
    first = context[cited[0]].split(". ")[0] if cited else None
    return {
        "claim_id": item.claim_id,
        "supporting_context_ids": cited if level != "unsupported" else [],
        "supporting_quotes": [first]
        if first and level in ("fully_supported", "partially_supported")
        else [],
        "explanation": planted.note,
        "unsupported_part": None,
        "contradicted": planted.contradicted,
        "contradicting_quote": first if planted.contradicted else None,
        "classification": level,
    }


@pytest.fixture
def author_judges() -> dict[str, ScriptedJudge]:
    reply = as_author()
    jobs = ("rerank", "tier", "sufficiency", "audit", "classify")
    return {job: ScriptedJudge([reply] * 4) for job in jobs}


# ---------------------------------------------------------------------------- library


def test_run_demo_chains_the_jobs(author_judges: dict[str, ScriptedJudge]) -> None:
    notes: list[str] = []
    result = run_demo(
        author_judges, on_step=lambda n: notes.append(f"{n.index} {n.step} {n.status}")
    )

    # rerank by the scripted scores keeps retrieval order; the copy is merged into its original
    assert result.rerank.ids()[:2] == ["credit-card", "k8s-termination"]
    assert any(r.duplicate_of == "k8s-termination" for r in result.rerank.ranked_passages)
    # tier sees the passages in reranked order; with the author's tiers everything agrees
    assert [a.passage_id for a in result.tier.classifications] == result.rerank.ids()
    assert result.tier_agreement() == (15, 15)
    # standard policy under the budget: the three answers, then background in reranked order
    context = result.context
    assert context.tokens_used <= DEMO_BUDGET and context.policy == "standard"
    assert [i.passage_id for i in context.items][:3] == [
        "k8s-termination",
        "grace-field",
        "kubectl-delete",
    ]
    assert {g.reason for g in context.left_out} == {"policy", "budget"}
    # the audit reads exactly the selected context and gets the author's claims
    audit_request = author_judges["audit"].requests[0]
    assert [p.passage_id for p in audit_request.payload.passages] == [
        i.passage_id for i in context.items
    ]
    sent = [c.claim_text for r in author_judges["audit"].requests for c in r.payload.claims]
    assert sent == [c.claim for c in DEMO.answer.claims]
    assert result.audit is not None and all(c.agrees for c in result.claim_checks())
    assert result.audit.decision.decision == DEMO.answer.expected_decision
    # classify reads its own passages
    classify_request = author_judges["classify"].requests[0]
    assert [p.passage_id for p in classify_request.payload.passages] == DEMO.classify.passage_ids
    assert result.label_agreement() is True
    # each step that calls a judge also reports its calls as they advance
    assert "2 tier progress" in notes
    notes = [n for n in notes if not n.endswith(" progress")]
    assert notes == [
        "1 rerank start",
        "1 rerank done",
        "2 tier start",
        "2 tier done",
        "3 select_context start",
        "3 select_context done",
        "4 sufficiency start",
        "4 sufficiency done",
        "5 audit start",
        "5 audit done",
        "6 classify start",
        "6 classify done",
    ]
    # the check before generating: the example's question over the selected context
    # suffices, the other one does not
    checked = result.parts["sufficiency"]
    assert [c.judged for c in checked.cases] == ["sufficient", "insufficient"]
    assert checked.agreement() == (2, 2)
    asked = author_judges["sufficiency"].requests
    assert [p.passage_id for p in asked[0].payload.passages] == [
        i.passage_id for i in context.items
    ]
    assert [t.step for t in result.timings] == [
        "rerank",
        "tier",
        "select_context",
        "sufficiency",
        "audit",
        "classify",
    ]

    report = json.loads(json.dumps(result.report()))
    assert report["tier"]["agreement"] == [15, 15]
    assert report["audit"]["agreement"] == [6, 6]
    assert report["classify"]["agrees"] is True and report["skipped"] == []


def test_run_demo_rejects_an_unknown_step_and_a_judge_that_cannot_do_the_job(
    author_judges: dict[str, ScriptedJudge],
) -> None:
    with pytest.raises(ConfigError, match="unknown demo step"):
        run_demo({"generate": "local:minilm"})
    with pytest.raises(ConfigError, match="cannot do the audit job"):
        run_demo({**author_judges, "audit": "local:minilm"})


# ---------------------------------------------------------------------------- CLI


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def test_cli_prints_each_section_and_writes_the_json_next_to_it(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], scripted: Callable[..., list[ScriptedJudge]]
) -> None:
    scripted(*[as_author()] * 10)
    code, out, err = run(capsys, "demo", "--judge", "scripted")
    assert code == 0, err

    for heading in (
        "1 · Rerank",
        "2 · Tier",
        "3 · Context for generation",
        "4 · Enough to answer?",
        "5 · Audit",
        "6 · Classify",
    ):
        assert heading in out
    assert DEMO.query[:40] in out
    assert "agrees with the author's tiers on 15 of 15 passages" in out
    assert f"of {DEMO_BUDGET} tokens used" in out and "over the budget" in out
    assert "left out termination-mirror: same text as k8s-termination" in out
    assert "agrees with the author on 6 of 6 claims" in out
    assert "Decision: BLOCK" in out and "contradicted:" in out
    assert "label grace-period-too-short" in out and "Any container still running" in out
    assert "Full result: evidex-demo.json" in out
    # progress on stderr, one line per start and end
    for step in ("[1/6] rerank with scripted", "[3/6] select_context done", "[6/6] classify done"):
        assert step in err
    assert "Traceback" not in err

    report = json.loads((in_tmp / "evidex-demo.json").read_text())
    assert set(report) >= {
        "question",
        "answer",
        "judges",
        "rerank",
        "tier",
        "context",
        "audit",
        "classify",
        "timings",
    }
    assert report["audit"]["decision"]["decision"] == "block"
    steps = ("rerank", "tier", "sufficiency", "audit", "classify")
    assert report["judges"] == dict.fromkeys(steps, "scripted")
    store = open_store()  # EVIDEX_DB: the demo logs to the normal store
    try:
        jobs = {r["job"] for r in store.audit_rows()}
    finally:
        store.close()
    assert jobs == set(steps)


def test_demo_writes_its_json_with_output_as_other_commands_and_json_file_still_works(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], scripted: Callable[..., list[ScriptedJudge]]
) -> None:
    scripted(*[as_author()] * 20)
    code, out, err = run(capsys, "demo", "--judge", "scripted", "-o", "mine.json")
    assert code == 0, err
    assert "Full result: mine.json" in out and (in_tmp / "mine.json").exists()
    code, out, err = run(capsys, "demo", "--judge", "scripted", "--json", "old.json")
    assert code == 0, err
    assert (in_tmp / "old.json").exists() and "--json FILE is deprecated; use --output" in err
    code, out, _ = run(capsys, "demo", "--help")
    assert "--output" in out and "--json" not in out


def test_cli_sends_the_llm_steps_to_an_openai_compatible_server(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], scripted: Callable[..., list[ScriptedJudge]]
) -> None:
    scripted(*[as_author()] * 10)

    def answer(body: dict[str, Any]) -> str:
        schema = body["response_format"]["json_schema"]["schema"]
        if "claims" in schema["properties"]:
            ids = schema["properties"]["claims"]["items"]["properties"]["claim_id"]["enum"]
            claims = [
                {
                    "claim_id": cid,
                    "supporting_context_ids": [],
                    "supporting_quotes": [],
                    "explanation": "Not in the context.",
                    "unsupported_part": None,
                    "contradicted": False,
                    "contradicting_quote": None,
                    "classification": "unsupported",
                }
                for cid in ids
            ]
            return json.dumps({"claims": claims})
        if "sufficient" in schema["properties"]:
            lacking = {"sufficient": False, "confidence": 0.9, "missing": ["a source"]}
            return json.dumps(lacking | {"supporting_passage_ids": [], "key_quotes": []})
        return json.dumps(
            {
                "classifications": [],
                "unclassifiable": True,
                "unclassifiable_reason": "The passages do not settle it.",
                "evidence_gaps": ["upload logs"],
            }
        )

    server: FakeOpenAIServer
    with serve() as server:
        server.add(*[Reply(answer)] * 8)
        code, out, err = run(
            capsys,
            "demo",
            "--judge",
            "openai:fake-model",
            "--rerank-judge",
            "scripted",
            "--tier-judge",
            "scripted",
            "--base-url",
            server.base_url,
            "-o",
            str(in_tmp / "out.json"),
        )
        requests = server.chat_requests
    assert code == 0, err
    kinds = [
        next(
            (
                k
                for k in ("claims", "sufficient")
                if k in r.body["response_format"]["json_schema"]["schema"]["properties"]
            ),
            "labels",
        )
        for r in requests
    ]
    assert kinds.count("labels") == 1 and kinds.count("claims") >= 1  # each valid at once
    assert kinds.count("sufficient") == 2  # the two questions checked before generating
    assert "audit openai:fake-model" in out and "classify openai:fake-model" in out
    # every claim unsupported: the two planted ones agree, the contradiction is missed
    assert "Decision: REVIEW" in out and "agrees with the author on 2 of 6 claims" in out
    assert "unclassifiable: The passages do not settle it." in out
    assert "the judge disagrees" in out
    report = json.loads((in_tmp / "out.json").read_text())
    assert report["audit"]["judge_id"] == "openai:fake-model"
    assert report["classify"]["unclassifiable"] is True
    assert [c["judged"] for c in report["sufficiency"]["cases"]] == ["insufficient"] * 2


def test_cli_without_the_llm_extra_runs_the_encoder_steps_and_says_how_to_install(
    in_tmp: Path,
    capsys: pytest.CaptureFixture[str],
    scripted: Callable[..., list[ScriptedJudge]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp → ImportError
    scripted(*[as_author()] * 4)
    code, out, err = run(capsys, "demo", "--rerank-judge", "scripted", "--tier-judge", "scripted")
    assert code == 0, err
    assert "Traceback" not in out + err
    assert "[4/6] sufficiency skipped" in err
    assert "[5/6] audit skipped" in err and "[6/6] classify skipped" in err
    assert "3 · Context for generation" in out and "Skipped:" in out
    flat = " ".join(out.split())
    assert "partial run: sufficiency, audit and classify need the embedded LLM" in flat
    assert "make llm" in flat and "pip install 'evidex[llm]'" in flat
    report = json.loads((in_tmp / "evidex-demo.json").read_text())
    assert report["audit"] is None and report["classify"] is None
    assert [s["step"] for s in report["skipped"]] == ["sufficiency", "audit", "classify"]
    assert "sufficiency" not in report
    assert report["tier"]["agreement"] == [15, 15]


def test_cli_refuses_bad_judge_options(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "demo", "--audit-judge", "nonsense")
    assert code == 2 and "unknown judge 'nonsense'" in err
    code, _, err = run(capsys, "demo", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and "--base-url applies to openai: judges only" in err
    assert not (in_tmp / "evidex-demo.json").exists()


# ---------------------------------------------------------------------------- the real thing


@pytest.mark.slow
def test_real_demo_runs_offline_with_minilm_and_qwen(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_cpp", reason="needs the llm extra")
    code, out, err = run(capsys, "demo")
    assert code == 0, err
    report = json.loads((in_tmp / "evidex-demo.json").read_text())
    assert report["judges"] == {
        "rerank": "local:minilm",
        "tier": "local:minilm",
        "sufficiency": "local:qwen",
        "audit": "local:qwen",
        "classify": "local:qwen",
    }
    assert report["skipped"] == []
    # the check before generating: both questions checked, each with a decision
    checked = report["sufficiency"]["cases"]
    assert [c["expected"] for c in checked] == ["sufficient", "insufficient"]
    assert all(c["report"]["decision"]["decision"] for c in checked)
    assert len(report["rerank"]["ranked_passages"]) == len(report["tier"]["classifications"]) == 15
    assert report["context"]["tokens_used"] <= DEMO_BUDGET and report["context"]["items"]
    claims = report["audit"]["claims"]
    assert [c["claim_text"] for c in claims] == [c.claim for c in DEMO.answer.claims]
    assert {c["classification"] for c in claims} <= LEVELS
    # local:qwen audits in score mode: code quotes, so the replies pass the checks, and the
    # planted contradiction (60 seconds where the passage says 30) is caught
    assert report["audit"]["source"] == "judge"
    assert report["audit"]["decision"]["decision"] == "block"
    assert [c["contradicted"] for c in claims] == [c.contradicted for c in DEMO.answer.claims]
    assert report["classify"]["source"] in ("judge", "fallback")
    assert [t["step"] for t in report["timings"]] == [
        "rerank",
        "tier",
        "select_context",
        "sufficiency",
        "audit",
        "classify",
    ]
    for heading in ("1 · Rerank", "2 · Tier", "3 · Context", "5 · Audit", "6 · Classify"):
        assert heading in out
