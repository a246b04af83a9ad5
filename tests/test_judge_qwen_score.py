"""``local:qwen`` scoring: candidate distributions read from the next-token logits.

The contract tests that need the model are slow and skipped without the ``llm`` extra (see the
``qwen`` fixture); the argument checks run without it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from evidex.errors import ConfigError, MissingExtraError
from evidex.judges import get_judge
from evidex.judges._qwen_grades import (
    GRADE_PROMPT_VERSION,
    GradeReading,
    grade_messages,
    grade_scale,
    score_reply,
    tier_reply,
)
from evidex.judges._qwen_score import score_candidates
from evidex.tasks.rerank.models import ScoreBatch
from evidex.tasks.rerank.pointwise import ScoreStep
from evidex.tasks.tier import TierBatch, TierStep
from evidex.types import DEFAULT_TIERS, Passage, TierDefinition, TierScheme

YES_NO = [
    {"role": "system", "content": "Answer with one word."},
    {"role": "user", "content": "Is the sky blue on a clear day? Answer yes or no."},
]


@pytest.mark.parametrize("candidates", [[], ["yes", "yes"], ["yes", ""]])
def test_candidates_must_be_distinct_and_non_empty(candidates: list[str]) -> None:
    with pytest.raises(ValueError, match="distinct non-empty"):
        score_candidates(None, None, [1, 2, 3], candidates)  # type: ignore[arg-type]


@pytest.mark.slow
def test_class_probabilities_are_a_distribution_that_reads_the_prompt(qwen: Any) -> None:
    probs = qwen.class_probabilities(YES_NO, ["Yes", "No"])
    assert list(probs) == ["Yes", "No"]
    assert math.isclose(sum(probs.values()), 1.0)
    assert probs["Yes"] > 0.8
    flipped = [YES_NO[0], {"role": "user", "content": "Is grass red? Answer yes or no."}]
    assert qwen.class_probabilities(flipped, ["Yes", "No"])["No"] > 0.5


@pytest.mark.slow
def test_multi_token_candidates_leave_the_cache_as_it_was(qwen: Any) -> None:
    candidates = ["Yes", "No", "partially supported", "unsupported"]
    qwen.reset_cache()
    first = qwen.candidate_scores(YES_NO, candidates)
    assert len(qwen._model().llama.tokenize(b"partially supported", add_bos=False)) > 1
    qwen.reset_cache()
    backwards = qwen.candidate_scores(YES_NO, list(reversed(candidates)))
    # each long candidate's continuation is rolled back before the next one is scored, so
    # the order of the candidates changes nothing
    assert backwards.log_probs == pytest.approx(first.log_probs, abs=1e-6)
    again = qwen.candidate_scores(YES_NO, candidates)
    # the prefix is reused: only the last prompt token runs again (llama.cpp's sums differ a
    # little with the batch shape, hence the tolerance)
    assert again.prompt_evaluated == 1 and again.prompt_tokens == first.prompt_tokens
    assert again.log_probs == pytest.approx(first.log_probs, rel=0.05, abs=0.1)
    assert 0.0 < first.mass <= 1.0
    assert first.best() == "Yes"
    assert qwen.last_timing.completion_tokens == 0


@pytest.mark.slow
def test_reply_prefix_is_part_of_the_prompt(qwen: Any) -> None:
    grade = [
        {
            "role": "user",
            "content": "Grade 0-3 how well the passage answers the query. Query: How tall is "
            "the Eiffel Tower? Passage: The Eiffel Tower is 330 metres tall.",
        }
    ]
    plain = qwen.candidate_scores(grade, ["0", "1", "2", "3"])
    primed = qwen.candidate_scores(grade, ["0", "1", "2", "3"], reply_prefix="Grade: ")
    assert primed.prompt_tokens > plain.prompt_tokens
    assert primed.best() == "3"


# --------------------------------------------------------------------------- mode=score replies


def _reading(*probabilities: float) -> GradeReading:
    return GradeReading(tuple(probabilities), mass=0.9)


EIFFEL = Passage(
    passage_id="a1",
    text="Paris has many sights. The Eiffel Tower is 330 metres tall since 2022. It is iron.",
)
BANANA = Passage(passage_id="c3", text="Bananas are rich in potassium and easy to digest.")


def test_grading_prompts_of_one_request_share_everything_before_the_passage() -> None:
    scale = grade_scale()
    first = grade_messages(scale, "How tall is it?", "one passage")
    second = grade_messages(scale, "How tall is it?", "another passage")
    assert first[0] == second[0]
    shared = first[1]["content"].split("one passage")[0]
    assert second[1]["content"].startswith(shared) and shared.endswith("Passage: ")
    system = first[0]["content"]
    assert system.index("- directly-supporting: ") < system.index("- irrelevant: ")


def test_score_mode_tier_reply_is_a_valid_tier_reply_with_a_named_heuristic() -> None:
    batch = TierBatch("How tall is the Eiffel Tower?", (EIFFEL, BANANA))
    scale = grade_scale(batch.scheme.tiers)
    sentence = "The Eiffel Tower is 330 metres tall since 2022."
    reply = tier_reply(
        "local:qwen",
        ["a1", "c3"],
        [_reading(0.05, 0.05, 0.2, 0.7), _reading(0.6, 0.2, 0.1, 0.1)],
        [(sentence, 0.81), ("Bananas are rich in potassium and easy to digest.", 0.02)],
        scale,
    )
    value = TierStep().validate(batch, json.loads(json.dumps(reply)))
    top, bottom = value.classifications
    assert (top.tier, bottom.tier) == ("directly-supporting", "irrelevant")
    assert top.key_evidence_snippet == sentence and sentence in EIFFEL.text
    assert bottom.key_evidence_snippet is None
    assert "p(3)=0.70" in top.justification and "mode=score" in top.justification
    assert "best-matching sentence (heuristic" in top.justification
    assert "not quoted by the model" in top.justification


def test_score_mode_tier_reply_follows_a_custom_scheme() -> None:
    scheme = TierScheme(
        tiers=(
            TierDefinition(name="useful", definition="answers it"),
            TierDefinition(name="useless", definition="does not"),
        ),
        fallback_tier="useful",
    )
    scale = grade_scale(scheme.tiers)
    assert [t.name for t in scale] == ["useless", "useful"]
    reply = tier_reply("local:qwen", ["a1"], [_reading(0.3, 0.7)], [("x", 0.1)], scale)
    assert reply["classifications"][0]["tier"] == "useful"


def test_score_mode_rerank_score_is_the_expected_grade() -> None:
    reply = score_reply(
        "local:qwen", ["a1", "c3"], [_reading(0, 0, 0.5, 0.5), _reading(1, 0, 0, 0)]
    )
    batch = ScoreBatch("How tall is the Eiffel Tower?", (EIFFEL, BANANA))
    value = ScoreStep().validate(batch, reply)
    assert [s.relevance_score for s in value.scores] == [pytest.approx(2.5), 0.0]
    assert "expected grade 2.50 of 3" in value.scores[0].justification


def test_a_tied_distribution_takes_the_lower_grade() -> None:
    assert _reading(0.25, 0.25, 0.25, 0.25).grade == 0
    assert _reading(0.1, 0.4, 0.4, 0.1).grade == 1


@pytest.mark.parametrize("bad", [{"mode": "fast"}, {"mode": ""}, {"mdoe": "score"}])
def test_a_bad_mode_is_a_config_error(bad: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"mode|mdoe"):
        get_judge("local:qwen", **bad)


def test_the_mode_is_in_the_fingerprint_and_the_model_version() -> None:
    pytest.importorskip("llama_cpp", reason="the llm extra is not installed (llama-cpp-python)")
    from evidex.judges._qwen import QwenJudge, QwenOptions

    try:
        score = QwenJudge(options=QwenOptions(mode="score"))
        generate = QwenJudge(options=QwenOptions(mode="generate"))
    except MissingExtraError as exc:
        pytest.skip(str(exc))
    assert score.fingerprint()["mode"] == "score" != generate.fingerprint()["mode"]
    assert score.fingerprint()["grade_prompt"] == GRADE_PROMPT_VERSION
    assert "snippets" in score.fingerprint() and "snippets" not in generate.fingerprint()
    assert score.model_version.endswith("by score")
    assert generate.model_version.endswith("by generate")


# --------------------------------------------------------------------------- mode=score, real model

QUESTION = "How tall is the Eiffel Tower?"
PASSAGES = (
    EIFFEL,
    Passage(passage_id="b2", text="Paris is the capital of France and lies on the Seine."),
    BANANA,
)


@pytest.mark.slow
def test_real_score_mode_tier_job(qwen: Any, store: Any) -> None:
    from evidex.jobs.tier import tier
    from evidex.judges._qwen import QwenJudge, QwenOptions

    judge = QwenJudge(options=QwenOptions(mode="score"))
    result = tier(QUESTION, PASSAGES, judge=judge, store=store)
    by_id = {a.passage_id: a for a in result.classifications}
    assert all(a.source == "judge" for a in result.classifications), result
    order = DEFAULT_TIERS.names
    assert order.index(by_id["a1"].tier) < order.index(by_id["c3"].tier)
    for passage in PASSAGES:
        assignment = by_id[passage.passage_id]
        assert "mode=score" in assignment.justification
        snippet = assignment.key_evidence_snippet
        assert snippet is None or snippet in passage.text
    assert by_id["a1"].key_evidence_snippet == "The Eiffel Tower is 330 metres tall since 2022."
    assert judge.last_timing is not None and judge.last_timing.completion_tokens == 0
    rows = store.audit_rows(run_id=result.run_id)
    assert rows and all(
        r["model_version"] == judge.model_version for r in rows if r["status"] == "ok"
    )


@pytest.mark.slow
def test_real_score_mode_pointwise_rerank_puts_the_answer_first(qwen: Any, store: Any) -> None:
    from evidex.jobs.rerank import rerank
    from evidex.judges._qwen import QwenJudge, QwenOptions

    judge = QwenJudge(options=QwenOptions(mode="score"))
    result = rerank(
        QUESTION, list(reversed(PASSAGES)), strategy="pointwise", judge=judge, store=store
    )
    assert result.source == "judge", result.reason
    assert result.ids()[0] == "a1"
    assert all("expected grade" in r.justification for r in result.ranked_passages)
