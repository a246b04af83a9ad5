"""Which scorer answers which request in score mode (``mode=score`` of ``local:qwen``).

One table, payload type to scorer: the judge looks the request's payload up here, and a payload
it does not find is written by the model (``generate``). A scorer asks its Yes/No questions
through ``score`` (the judge's :meth:`~evidex.judges._qwen.LlamaJudge.candidate_scores`, with
the cancellation check and the token count around it) and returns the reply JSON, which the
harness validates like any judge's. A new scoring job adds one line to :data:`SCORED` and its
prompt version to :data:`SCORING_VERSIONS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evidex.judges._qwen_audit import AUDIT_PAYLOADS, SCORING_VERSION, AuditScorer, model_grade
from evidex.judges._qwen_classify import CLASSIFY_SCORING_VERSION, ClassifyScorer
from evidex.judges._qwen_classify import model_yes as classify_yes
from evidex.judges._qwen_grades import GRADE_PROMPT_VERSION, GRADED_PAYLOADS, grade_reply
from evidex.judges._qwen_score import CandidateScores
from evidex.judges._qwen_sufficiency import SUFFICIENCY_SCORING_VERSION, SufficiencyScorer
from evidex.judges._qwen_sufficiency import model_yes as sufficiency_yes
from evidex.judging import ClassifyPayload, Message, Payload
from evidex.tasks.sufficiency import SufficiencyPayload

__all__ = ["IN_PIECES", "SCORED", "SCORING_VERSIONS", "Score", "Scorer", "scorer_of"]

Score = Callable[[Sequence[Message | Mapping[str, str]], Sequence[str], str], CandidateScores]
"""``(messages, candidates, reply_prefix) -> CandidateScores`` of the judge's model."""
Scorer = Callable[[Any, Score, Any, str], str]
"""``(payload, score, snippets, judge_id) -> reply JSON``; ``snippets`` is ``local:minilm``
(its ``embed`` and ``match`` pick the sentences quoted)."""


def _yes_no(score: Score) -> Callable[[Sequence[Message], Sequence[str]], Mapping[str, float]]:
    return lambda messages, candidates: score(messages, candidates, "").probabilities


def _graded(payload: Any, score: Score, snippets: Any, name: str) -> str:
    reply, _ = grade_reply(name, payload, score, snippets.match)
    return json.dumps(reply)


def _audited(payload: Any, score: Score, snippets: Any, name: str) -> str:
    grade = model_grade(_yes_no(score))
    return AuditScorer(grade, snippets.embed, name=name).reply_text(payload)


def _classified(payload: Any, score: Score, snippets: Any, name: str) -> str:
    yes = classify_yes(_yes_no(score))
    return ClassifyScorer(yes, snippets.embed, name=name).reply_text(payload)


def _sufficiency(payload: Any, score: Score, snippets: Any, name: str) -> str:
    yes = sufficiency_yes(_yes_no(score))
    return SufficiencyScorer(yes, snippets.embed, name=name).reply_text(payload)


SCORED: dict[type[Payload], Scorer] = {
    **dict.fromkeys(GRADED_PAYLOADS, _graded),  # a question per passage (_qwen_grades)
    **dict.fromkeys(AUDIT_PAYLOADS, _audited),  # code splits and quotes (_qwen_audit)
    ClassifyPayload: _classified,  # a question per label (_qwen_classify)
    SufficiencyPayload: _sufficiency,  # per part and passage, and the whole (_qwen_sufficiency)
}
"""The payloads score mode answers, and how."""

IN_PIECES: tuple[type[Payload], ...] = (*AUDIT_PAYLOADS, ClassifyPayload, SufficiencyPayload)
"""The payloads whose scorer asks about a claim, label or question with the few passage
sentences the encoder picked for it (at most 60 words each), never a passage whole: their
prompts need not fit the context window (tier and pointwise rerank ask about one whole passage
per question, so their passages are still cut to it)."""

SCORING_VERSIONS: dict[str, str] = {
    "grade_prompt": GRADE_PROMPT_VERSION,
    "audit_scoring": SCORING_VERSION,
    "classify_scoring": CLASSIFY_SCORING_VERSION,
    "sufficiency_scoring": SUFFICIENCY_SCORING_VERSION,
}
"""The prompt and cut-point versions of every scorer, for the judge's fingerprint: editing one
changes the cache key of score mode."""


def scorer_of(payload: Any) -> Scorer | None:
    """The scorer of ``payload``'s type (or of the nearest base type listed), else None."""
    return next((SCORED[t] for t in type(payload).__mro__ if t in SCORED), None)
