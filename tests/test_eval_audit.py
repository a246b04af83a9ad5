"""``evidex eval audit``: claims graded on WiCE's three classes, one-claim answers audited with
their gold claim, several-claim answers matched by span overlap, claim-level F1, and the bad
inputs of issue 6."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evidex.evaluate.audit import claim_overlaps
from evidex.evaluate.metrics import match_claims, span_overlap
from evidex.judging import ClaimsPayload, JudgeRequest
from tests.audit_fixtures import (
    ANSWER,
    CEO,
    FOUNDED,
    FREE,
    PASSAGES,
    contradicted,
    graded,
    inferred,
    reply,
    supported,
)
from tests.evalkit import AnsweringJudge, run_cli, use_judge, write_golden

AUSTIN = "Acme Corp is based in Austin."
CONTEXT = [p.model_dump(exclude_none=True) for p in PASSAGES]


def _claim(text: str, classification: str) -> dict[str, Any]:
    return {"claim_text": text, "classification": classification}


# a1, a2: one-claim answers (the claim is the answer), audited with the gold claim given.
# a3: the fixture answer of three claims, audited whole; its golden set has a fourth claim
# that is not in the answer, so nothing can match it.
GOLDEN = [
    {
        "id": "a1",
        "answer": FOUNDED,
        "passages": CONTEXT,
        "claims": [_claim(FOUNDED, "fully_supported")],
    },
    {
        "id": "a2",
        "answer": AUSTIN,
        "passages": CONTEXT,
        "claims": [_claim(AUSTIN, "partially_supported")],
    },
    {
        "id": "a3",
        "answer": ANSWER,
        "passages": CONTEXT,
        "claims": [
            _claim(FOUNDED, "fully_supported"),
            _claim(CEO, "inferred"),
            _claim(FREE, "unsupported"),
            _claim("Jane Smith leads the board.", "unsupported"),
        ],
    },
]
GRADES = {
    FOUNDED: supported(),
    AUSTIN: inferred(
        AUSTIN,
        supporting_context_ids=["passage-1"],
        supporting_quotes=["The company is headquartered in Austin, Texas."],
        explanation="Headquartered in Austin suggests being based there.",
    ),
}


def audit_reply(request: JudgeRequest) -> dict[str, Any]:
    """Grades given claims (the classification pass) or extracts the fixture answer's three."""
    if isinstance(request.payload, ClaimsPayload):
        entries = [graded(c.claim_id, GRADES[c.claim_text]) for c in request.payload.claims]
        return {"claims": entries}
    assert request.payload.answer == ANSWER
    return reply(supported(), inferred(), contradicted())


def test_eval_audit_cli_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = AnsweringJudge(audit_reply)
    use_judge(monkeypatch, judge)
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN)
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys, "eval", "audit", "--golden", str(golden), "-j", "scripted", "-o", str(out)
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    met = report["metrics"]
    # matched (gold, judge) pairs on three classes: a1 (s, s); a2 (p, n); a3 (s, s), (n, n),
    # (n, n) — inferred and unsupported are both not_supported
    assert met["accuracy"] == pytest.approx(4 / 5)
    # supported: 2 of 2 → F1 1; partially: none predicted → 0; not_supported: 2 right of 3
    # predicted, 2 gold → P 2/3, R 1, F1 0.8
    assert met["macro_f1"] == pytest.approx((1 + 0 + 2 * (2 / 3) / (2 / 3 + 1)) / 3)
    assert met["f1(label=supported)"] == pytest.approx(1.0)
    # claim level: 4 graded alike, 5 audited, 6 gold
    precision, recall = 4 / 5, 4 / 6
    assert met["claim_f1"] == pytest.approx(2 * precision * recall / (precision + recall))
    assert report["claims"]["matching"]["f1"] == pytest.approx(2 * 1 * (5 / 6) / (1 + 5 / 6))
    counts = {k: report["claims"][k] for k in ("gold", "audited", "matched", "agree")}
    assert counts == {"gold": 6, "audited": 5, "matched": 5, "agree": 4}
    assert report["confusion"]["labels"] == ["supported", "partially_supported", "not_supported"]
    assert report["confusion"]["matrix"] == [[2, 0, 0], [0, 0, 1], [0, 0, 2]]
    assert report["levels"] == {
        "fully_supported": 2,
        "partially_supported": 0,
        "inferred": 2,
        "unsupported": 1,
    }
    assert sum(report["decisions"].values()) == 3
    assert report["claims_from"] == {"gold": 2, "extract": 1}
    assert report["fallbacks"] == 0
    (worst,) = report["worst"]
    assert (worst["id"], worst["golden"], worst["judge"]) == (
        "a2",
        "partially_supported",
        "not_supported",
    )
    assert worst["explanation"] == "Headquartered in Austin suggests being based there."
    assert any("1 of 6 gold claims matched no audited claim" in w for w in report["warnings"])
    md = (out / "report.md").read_text()
    assert "![confusion matrix](confusion.png)" in md and "Worst disagreements" in md
    assert (out / "confusion.png").read_bytes()[:4] == b"\x89PNG"
    # a1 and a2 went through the classification pass with their gold claim only
    given = [r for r in judge.requests if isinstance(r.payload, ClaimsPayload)]
    assert [[c.claim_text for c in r.payload.claims] for r in given] == [[FOUNDED], [AUSTIN]]


def test_claims_are_matched_by_span_overlap() -> None:
    assert span_overlap((0, 10), (5, 15)) == pytest.approx(5 / 15)
    assert span_overlap((0, 4), (4, 8)) == 0.0
    # the best overlaps pair first; each claim is used once; below 0.5 stays unmatched
    assert match_claims([[0.9, 0.6], [0.7, 0.2], [0.1, 0.4]]) == [(0, 0)]
    assert match_claims([[0.6, 0.9], [0.8, 0.1]]) == [(0, 1), (1, 0)]
    answer = "Tea is hot. Milk is cold."
    overlaps = claim_overlaps(
        answer,
        ["Tea is hot.", "Milk is cold and white."],  # the second is not in the answer
        [("Tea is hot", None), ("Milk is cold.", (12, 25))],
    )
    assert overlaps[0][0] == pytest.approx(10 / 11)  # span (0, 10) against (0, 11)
    assert overlaps[1][1] == pytest.approx(3 / 5)  # words {milk, is, cold} of five


def test_audit_predictions_made_elsewhere_missing_ids_and_unknown_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = write_golden(tmp_path / "g.jsonl", GOLDEN[:2])
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        json.dumps({"id": "a1", "claims": [_claim(FOUNDED, "fully_supported")]})
        + "\n"
        + json.dumps({"id": "a2", "claims": [_claim(AUSTIN, "partially_supported")]})
        + "\n"
    )
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys, "eval", "--predictions", str(preds), "--golden", str(golden), "-o", str(out)
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["job"] == "audit" and report["metrics"]["accuracy"] == 1.0
    assert report["metrics"]["claim_f1"] == 1.0

    preds.write_text(json.dumps({"id": "a1", "claims": [_claim(FOUNDED, "true")]}) + "\n")
    code, _, err = run_cli(
        capsys, "eval", "audit", "--predictions", str(preds), "--golden", str(golden)
    )
    assert code == 2 and "1 golden answer(s) have no prediction: a2" in err
    preds.write_text(
        "".join(
            json.dumps({"id": r["id"], "claims": [_claim(r["answer"], "true")]}) + "\n"
            for r in GOLDEN[:2]
        )
    )
    code, _, err = run_cli(
        capsys, "eval", "audit", "--predictions", str(preds), "--golden", str(golden)
    )
    assert code == 2 and "unknown claim classification 'true'" in err


def test_bad_audit_golden_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [GOLDEN[0], {**GOLDEN[1], "claims": [_claim(AUSTIN, "mostly_true")]}]
    golden = write_golden(tmp_path / "g.jsonl", rows)
    code, _, err = run_cli(capsys, "eval", "audit", "--golden", str(golden), "-j", "scripted")
    assert code == 2 and f"{golden}:2" in err and "unknown label 'mostly_true'" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text(" \n")
    code, _, err = run_cli(capsys, "eval", "audit", "--golden", str(empty), "-j", "scripted")
    assert code == 2 and "the golden set is empty" in err


def test_wice_folder_is_an_audit_golden_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_judge(monkeypatch, AnsweringJudge(audit_reply))
    chunks = tmp_path / "wice" / "oracle_chunks"
    chunks.mkdir(parents=True)
    (chunks / "dev.jsonl").write_text(
        json.dumps(
            {
                "label": "supported",
                "claim": FOUNDED,
                "evidence": [PASSAGES[0].text, PASSAGES[1].text],
                "meta": {"id": "dev7", "chunk_idx": [0, 1], "oracle_idx": [0]},
            }
        )
        + "\n"
    )
    # WiCE passages are named by sentence index: s0 is the founding sentence
    monkeypatch.setitem(GRADES, FOUNDED, supported(supporting_context_ids=["s0"]))
    out = tmp_path / "r"
    code, _, err = run_cli(
        capsys,
        "eval",
        "audit",
        "--golden",
        str(tmp_path / "wice"),
        "-j",
        "scripted",
        "-o",
        str(out),
    )
    assert code == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["metrics"]["accuracy"] == 1.0 and report["claims_from"] == {"gold": 1}
