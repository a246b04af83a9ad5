"""Each mode checks the window it needs: a judge that writes its reply must hold the whole
exchange and its retry, a judge that answers in pieces (``local:qwen`` in score mode: a claim,
label or question with a few picked sentences per question) must not be held to that.

40 passages at a 4096-token window: score mode audits them whole (no refusal, no passage cut),
generate mode still refuses what it cannot hold; classify and sufficiency in score mode keep
every passage whole too. The fast tests use doubles with the same window; the slow ones the
real model at its default window.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import evidex
from evidex.errors import ConfigError
from evidex.jobs import SpecContext
from evidex.jobs.classify import ClassifyInput, ClassifyOptionsModel, ClassifySpec
from evidex.jobs.sufficiency import SufficiencyInput, SufficiencySpec
from evidex.judging import Payload
from tests.scripted import ScriptedJudge
from tests.test_qwen_audit import ScoringAuditJudge

TOPICS = [
    "copper wiring",
    "river deltas",
    "bread yeast",
    "glacier melt",
    "tidal power",
    "honey bees",
    "steel bridges",
    "coral reefs",
]
PASSAGES = [
    {
        "passage_id": f"p{i}",
        "text": " ".join(
            f"Note {j} on {TOPICS[i % len(TOPICS)]} says the measured value {i * 10 + j} held "
            f"through the season of study number {i}."
            for j in range(6)
        ),
    }
    for i in range(40)
]
ANSWER = "Note 1 on copper wiring says the measured value 1 held. Honey bees dance at dawn."


class _Writes(ScoringAuditJudge):
    """The scoring double at ``local:qwen``'s default window, answering in pieces or not."""

    context_window = 4096
    pieces: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__({"copper": "fully_supported", "bees": "unsupported"})

    def answers_in_pieces(self, payload: type[Payload]) -> bool:
        return self.pieces


class _Generates(_Writes):
    pieces: ClassVar[bool] = False


def test_the_passages_are_well_over_the_default_window() -> None:
    judge = _Writes()
    assert sum(judge.count_tokens(p["text"]) for p in PASSAGES) > judge.context_window


def test_score_mode_audits_40_passages_at_the_default_window_without_cutting_them() -> None:
    result = evidex.audit(ANSWER, PASSAGES, judge=_Writes(), store="sqlite://")
    assert result.source == "judge" and result.judge_calls == 1
    assert not [e for e in result.events if e.kind in ("truncated", "batches_shrunk")]
    levels = {c.claim_text: c.classification for c in result.claims}
    assert levels == {
        "Note 1 on copper wiring says the measured value 1 held.": "fully_supported",
        "Honey bees dance at dawn.": "unsupported",
    }


@pytest.mark.parametrize("mode", ["one-pass", "two-pass"])
def test_generate_mode_still_refuses_what_it_cannot_hold(mode: str) -> None:
    with pytest.raises(ConfigError, match="cannot hold an audit exchange and its retry"):
        evidex.audit(ANSWER, PASSAGES, judge=_Generates(), store="sqlite://", mode=mode)


def test_score_mode_plans_keep_every_passage_whole_for_classify_and_sufficiency() -> None:
    class Pieces(ScriptedJudge):
        context_window = 4096
        pieces = True

        def answers_in_pieces(self, payload: type[Payload]) -> bool:
            return self.pieces

    judge = Pieces()
    options = ClassifyOptionsModel(labels={"A": "the first", "B": "the second"})
    classify = ClassifySpec.of(options, SpecContext(judge))
    item = ClassifyInput(input="Which value held for copper wiring?", passages=PASSAGES)
    planned = classify.plan(item, judge)
    assert len(planned.data.batch.passages) == 40 and not planned.data.dropped
    assert [p.text for p in planned.data.batch.passages] == [p["text"] for p in PASSAGES]
    check = SufficiencySpec()
    query = SufficiencyInput(query="Which value held for copper wiring?", passages=PASSAGES)
    kept = check.plan(query, judge).data.prepared.passages
    assert [p.text for p in kept] == [p["text"] for p in PASSAGES]
    judge.pieces = False  # a judge that reads the prompt whole: passages cut or left out
    assert classify.plan(item, judge).data.dropped
    cut = check.plan(query, judge).data.prepared.passages
    assert sum(len(p.text) for p in cut) < sum(len(p["text"]) for p in PASSAGES)


@pytest.mark.slow
def test_the_real_model_at_its_default_window(qwen: Any) -> None:
    """``local:qwen`` at ``n_ctx`` 4096: the audit job's own mode (score) audits the 40
    passages; the judge's generate mode refuses them before any call."""
    from evidex.store import open_store

    assert qwen.options.n_ctx == 4096
    store = open_store("sqlite://")
    result = evidex.audit(ANSWER, PASSAGES, store=store)  # the default judge, built
    assert result.source == "judge"
    # the audit log says which mode judged: the model version ends with it
    [row] = [r for r in store.audit_rows(run_id=result.run_id) if r["status"] == "ok"]
    assert row["model_version"].endswith("; mode=score")
    assert not [e for e in result.events if e.kind in ("truncated", "batches_shrunk")]
    assert len(result.claims) == 2 and result.summary.total_claims == 2
    with pytest.raises(ConfigError, match="cannot hold an audit exchange and its retry"):
        evidex.audit(ANSWER, PASSAGES, judge=qwen, store="sqlite://")
