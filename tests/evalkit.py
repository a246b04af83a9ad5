"""Small fixtures for the evaluation tests: a golden tier set and judges that grade by a marker
word in the passage, so each test knows exactly where the judge and the golden set disagree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from evidex.judging import JudgeRequest
from tests.scripted import ScriptedJudge

TIERS = ["directly-supporting", "contextually-relevant", "tangentially-related", "irrelevant"]
MARK = {"answer": 0, "background": 1, "mention": 2, "offtopic": 3}


def marked_tier(text: str) -> str:
    """The tier the marker judge gives: the first marker word found in the text."""
    for word, index in MARK.items():
        if word in text:
            return TIERS[index]
    return TIERS[3]


def marker_reply(request: JudgeRequest) -> dict[str, Any]:
    """A valid tier reply grading each passage by its marker word."""
    items = []
    for p in request.payload.passages:  # type: ignore[attr-defined]
        tier = marked_tier(p.text)
        items.append(
            {
                "passage_id": p.passage_id,
                "tier": tier,
                "justification": f"It says {' '.join(p.text.split()[:4])}.",
                "key_evidence_snippet": None if tier == TIERS[3] else p.text.split()[0],
            }
        )
    return {"classifications": items}


class MarkerJudge(ScriptedJudge):
    """Always answers with :func:`marker_reply`; counts its calls."""

    def __init__(self, judge_id: str = "scripted") -> None:
        super().__init__([])
        self.judge_id = judge_id

    async def complete(self, request: JudgeRequest) -> Any:
        self.replies = [marker_reply]
        return await super().complete(request)


class ScoringJudge(MarkerJudge):
    """A score-based judge: ``score`` reads ``score=0.NN`` from each text."""

    jobs: ClassVar[frozenset[str]] = frozenset({"tier"})

    class _Thresholds:
        sentence_weight = 0.5

    thresholds = _Thresholds()

    def score(self, query: str, texts: list[str]) -> list[float]:
        return [float(t.split("score=")[1].split()[0]) for t in texts]


def golden_rows() -> list[dict[str, Any]]:
    """Two queries, 12 pairs; the marker judge disagrees on exactly three of them."""
    rows = []
    spec = {
        "q1": [
            ("answer", 0),
            ("answer", 0),
            ("background", 1),
            ("background", 0),  # judge one tier lower
            ("mention", 2),
            ("offtopic", 3),
        ],
        "q2": [
            ("answer", 0),
            ("background", 1),
            ("mention", 2),
            ("mention", 3),  # judge one tier higher
            ("offtopic", 3),
            ("offtopic", 0),  # judge three tiers lower: the worst disagreement
        ],
    }
    scores = {0: 0.9, 1: 0.6, 2: 0.4, 3: 0.1}
    for qid, items in spec.items():
        for i, (word, gold) in enumerate(items):
            judged = MARK[word]
            rows.append(
                {
                    "query_id": qid,
                    "query": f"question {qid}",
                    "passage_id": f"{qid}p{i}",
                    "text": f"{word} passage {qid} {i} score={scores[judged] + i / 100:.2f}",
                    "tier": TIERS[gold],
                }
            )
    return rows


def write_golden(path: Path, rows: list[dict[str, Any]] | None = None) -> Path:
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in (golden_rows() if rows is None else rows)),
        encoding="utf-8",
    )
    return path


def write_gates(folder: Path, body: str) -> Path:
    """A gates file ``gates.toml`` in ``folder`` (relative paths in it are resolved from
    there)."""
    path = folder / "gates.toml"
    path.write_text(body, encoding="utf-8")
    return path


class AnsweringJudge(ScriptedJudge):
    """Answers every request with ``answer(request)`` (a dict or raw text); counts its calls.
    A list of answers for one request key lets a test script a re-ask."""

    def __init__(self, answer: Any, judge_id: str = "scripted") -> None:
        super().__init__([])
        self.judge_id = judge_id
        self.answer = answer

    async def complete(self, request: JudgeRequest) -> Any:
        self.replies = [self.answer]
        return await super().complete(request)


def use_judge(monkeypatch: Any, judge: ScriptedJudge, spec: str = "scripted") -> None:
    """Make the judge spec ``spec`` build ``judge`` (the registry is restored after the test)."""
    from evidex import judges

    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    judges.register_judge(spec, lambda _spec, **_options: judge)


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """Run the real entry point: exit code, stdout, and stderr with its whitespace folded."""
    import re

    from evidex.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, re.sub(r"\s+", " ", err)
