"""``local:qwen`` scoring: candidate distributions read from the next-token logits.

The contract tests that need the model are slow and skipped without the ``llm`` extra (see the
``qwen`` fixture); the argument checks run without it."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any

import pytest

from evidex.errors import ConfigError, MissingExtraError
from evidex.judges import get_judge
from evidex.judges._qwen_grades import (
    CUT_POINTS,
    GRADE_PROMPT_VERSION,
    grade_messages,
    grade_reply,
    relevance,
    tier_reply,
)
from evidex.judges._qwen_score import CandidateScores, score_candidates
from evidex.judging import PassageText, ScorePayload, TierPayload
from evidex.tasks.rerank.models import ScoreBatch
from evidex.tasks.rerank.pointwise import ScoreStep
from evidex.tasks.tier import TierBatch, TierStep
from evidex.types import DEFAULT_TIERS, Passage

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


EIFFEL = Passage(
    passage_id="a1",
    text="Paris has many sights. The Eiffel Tower is 330 metres tall since 2022. It is iron.",
)
BANANA = Passage(passage_id="c3", text="Bananas are rich in potassium and easy to digest.")
SENTENCE = "The Eiffel Tower is 330 metres tall since 2022."


def _scorer(yes: dict[str, float], seen: list[list[dict[str, str]]]) -> Any:
    """A stand-in for the model: p(Yes) by the passage the prompt asks about."""

    def score(messages: list[dict[str, str]], candidates: list[str], prefix: str) -> Any:
        seen.append(messages)
        assert candidates == ["Yes", "No"] and prefix == ""
        passage = messages[-1]["content"].split("Passage: ")[1]
        p = next(v for k, v in yes.items() if k in passage)
        return CandidateScores(
            probabilities={"Yes": p, "No": 1 - p},
            log_probs={"Yes": math.log(p), "No": math.log(1 - p)},
            mass=0.9,
            prompt_tokens=10,
            prompt_evaluated=10,
            seconds=0.0,
        )

    return score


def _match(query: str, texts: Any) -> list[Any]:
    def sentence(text: str) -> Any:
        first = SENTENCE if SENTENCE in text else text
        return SimpleNamespace(sentence=SimpleNamespace(text=first, score=0.5))

    return [sentence(t) for t in texts]


def test_questions_of_one_request_share_everything_before_the_passage() -> None:
    first = grade_messages("How tall is it?", "one passage")
    second = grade_messages("How tall is it?", "another passage")
    assert first[0] == second[0]
    shared = first[1]["content"].split("one passage")[0]
    assert second[1]["content"].startswith(shared) and shared.endswith("Passage: ")
    assert first[1]["content"].endswith("Answer Yes or No.")


def test_the_relevance_score_is_p_yes_renormalised() -> None:
    seen: list[list[dict[str, str]]] = []
    assert relevance(_scorer({"Eiffel": 0.8}, seen), "q", EIFFEL.text) == pytest.approx(0.8)


def test_tiers_come_from_the_cut_points_with_a_named_heuristic_snippet() -> None:
    high, mid, low = CUT_POINTS.points
    assert 1 > high > mid > low > 0
    batch = TierBatch("How tall is the Eiffel Tower?", (EIFFEL, BANANA))
    seen: list[list[dict[str, str]]] = []
    score = _scorer({"Eiffel": high, "Bananas": low - 0.01}, seen)
    payload = TierPayload(batch.query, PassageText.of(batch.passages), DEFAULT_TIERS.tiers)
    reply, read = grade_reply("local:qwen", payload, score, _match)
    assert read == 20 and len(seen) == 2
    value = TierStep().validate(batch, json.loads(json.dumps(reply)))
    top, rest = value.classifications
    # s equal to a cut point reaches its tier; just below the last one is the bottom tier
    assert (top.tier, rest.tier) == ("directly-supporting", "irrelevant")
    assert top.key_evidence_snippet == SENTENCE and SENTENCE in EIFFEL.text
    assert f"= {high:.3f}" in top.justification and "mode=score" in top.justification
    assert f"≥ {high:.2f} cut point for directly-supporting" in top.justification
    assert "best-matching sentence (heuristic" in top.justification
    assert "not quoted by the model" in top.justification
    assert f"< {low:.2f} cut point for tangentially-related" in rest.justification


def test_between_cut_points_is_the_middle_tier() -> None:
    high, mid, low = CUT_POINTS.points
    reply = tier_reply(
        "local:qwen",
        ["a1", "c3"],
        [(high + mid) / 2, (mid + low) / 2],
        [("x", 0.1)] * 2,
        list(DEFAULT_TIERS.names),
    )
    assert [c["tier"] for c in reply["classifications"]] == [
        "contextually-relevant",
        "tangentially-related",
    ]


def test_a_two_tier_scheme_splits_at_the_middle_cut_point() -> None:
    names = ["useful", "useless"]
    mid = CUT_POINTS.points[1]
    reply = tier_reply("local:qwen", ["a1", "c3"], [mid, mid - 0.01], [("x", 0.1)] * 2, names)
    assert [c["tier"] for c in reply["classifications"]] == names


def test_score_mode_rerank_score_is_s() -> None:
    batch = ScoreBatch("How tall is the Eiffel Tower?", (EIFFEL, BANANA))
    seen: list[list[dict[str, str]]] = []
    payload = ScorePayload(batch.query, PassageText.of(batch.passages))
    score = _scorer({"Eiffel": 0.9, "Bananas": 0.2}, seen)
    reply, _ = grade_reply("local:qwen", payload, score, _match)
    value = ScoreStep().validate(batch, reply)
    assert [s.relevance_score for s in value.scores] == [pytest.approx(0.9), pytest.approx(0.2)]
    assert "p(Yes)/(p(Yes)+p(No)) = 0.900" in value.scores[0].justification


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
    assert score.model_version.endswith("; mode=score")
    assert generate.model_version.endswith("; mode=generate")


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
    assert all("p(Yes)" in r.justification for r in result.ranked_passages)
