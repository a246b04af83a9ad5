"""``local:qwen`` scoring: candidate distributions read from the next-token logits.

The contract tests that need the model are slow and skipped without the ``llm`` extra (see the
``qwen`` fixture); the argument checks run without it."""

from __future__ import annotations

import math
from typing import Any

import pytest

from evidex.judges._qwen_score import score_candidates

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
