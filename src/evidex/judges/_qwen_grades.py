"""The scoring mode of the embedded LLM judges (``mode=score``): grades from the model's
distribution over the tier names, for the tier job and the pointwise rerank step.

Writing a tier batch's JSON (a justification and a quote per passage) is most of a
``mode=generate`` call on a CPU, and a 1.5B model's quotes are where its replies fail. Here each
passage gets a short prompt of its own (the tiers with their definitions, the query, the
passage) and a reply begun as ``{"tier": "``; the judge reads how probable each tier name is as
the continuation (:mod:`evidex.judges._qwen_score`, full sequence log-probabilities): one
prompt evaluation per passage, the instructions and the query shared by every passage of a
request and so evaluated once, nothing generated. It is the choice ``mode=generate`` makes
first (the schema puts ``tier`` before the justification), read as a distribution.

- Grades: the request's tier scheme, most relevant tier = highest grade (the default scheme:
  3 directly-supporting, 2 contextually-relevant, 1 tangentially-related, 0 irrelevant);
  pointwise rerank uses the default scheme.
- Tier: the most probable tier. Pointwise rerank: ``relevance_score`` = the expected grade,
  ``sum g * p(g)``, on the scale 0..top (so passages of one tier are ordered by how sure).
- The model writes no text, so the rest of a tier reply is a named heuristic: the
  justification gives the distribution, and ``key_evidence_snippet`` is the passage's
  best-matching sentence by ``local:minilm`` (a verbatim slice, see
  :meth:`evidex.judges.minilm.MiniLMJudge.match`), said to be one. The bottom tier quotes
  nothing (the tier spec's null snippet for irrelevant).
- Why tier names, not grade digits: on 16 LLMJudge dev pairs (4 queries outside the bench
  samples, one pair per NIST grade each), a "reply with the grade, one digit" prompt gave the
  shipped 1.5B model nearly flat digit distributions (mean expected grade 1.81 / 1.99 / 1.92
  / 2.01 for NIST 0 / 1 / 2 / 3; with an UMBRELA-style scale 1.56 / 1.90 / 1.84 / 1.93). The
  tier names give sharper distributions, but the model leans to contextually-relevant
  whatever it reads (see docs/benchmarks.md, qwen_modes_agreement, before relying on its
  tiers); dividing by its probabilities for the passage ``N/A`` (contextual calibration)
  pushed irrelevant passages to directly-supporting on a first batch, so it is not used.
- A custom tier prompt (``prompt=``, ``EVIDEX_PROMPT_TIER``) is not read in this mode: the
  grading prompt is this module's, and its hash is in the judge's fingerprint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evidex.errors import ConfigError
from evidex.judges import _grades
from evidex.judges._grades import PoolScore
from evidex.judges._qwen_score import CandidateScores
from evidex.judging import ScorePayload, TierPayload
from evidex.types import DEFAULT_TIERS, TierDefinition, TierScheme

__all__ = [
    "GRADED_PAYLOADS",
    "GRADE_PROMPT_VERSION",
    "GradeReading",
    "grade_messages",
    "grade_reply",
    "grade_scale",
    "score_reply",
    "tier_reply",
]

SYSTEM = (
    "You sort the passages a search returned by how directly each one answers the query. "
    "Put the passage in exactly one of these tiers, judging only by what it says:\n"
    "[SCALE]\n"
    'Reply in JSON: {"tier": "..."}'
)
USER = "Query: [QUERY]\n\nPassage: [PASSAGE]"
REPLY_PREFIX = '{"tier": "'
"""The reply starts here, so the next tokens are the tier name (the model's choice)."""
GRADE_PROMPT_VERSION = hashlib.sha256(
    f"{SYSTEM}\n--\n{USER}\n--\n{REPLY_PREFIX}".encode()
).hexdigest()[:12]
"""Hash of the grading prompt, in the judge's fingerprint: editing the prompt changes the
cache key."""


GRADED_PAYLOADS = (TierPayload, ScorePayload)
"""The requests score mode answers: a tier batch and a pointwise rerank score batch."""

Score = Callable[[list[dict[str, str]], list[str], str], CandidateScores]
"""``(messages, candidates, reply_prefix) -> CandidateScores``: the judge's
:meth:`~evidex.judges._qwen.LlamaJudge.candidate_scores`."""
Match = Callable[[str, Sequence[str]], Sequence[Any]]
"""``(query, texts) -> matches`` with ``.sentence.text`` and ``.sentence.score``:
:meth:`evidex.judges.minilm.MiniLMJudge.match`."""


def grade_reply(
    judge_id: str, payload: TierPayload | ScorePayload, score: Score, match: Match
) -> tuple[dict[str, Any], int]:
    """The reply to a tier or score request, and the prompt tokens read: one grading prompt
    per passage, in order, so consecutive prompts share the instructions and the query."""
    scale = grade_scale(payload.tiers if isinstance(payload, TierPayload) else ())
    names = [t.name for t in scale]
    readings = []
    read = 0
    for passage in payload.passages:
        scores = score(grade_messages(scale, payload.query, passage.text), names, REPLY_PREFIX)
        readings.append(GradeReading(tuple(scores.probabilities[n] for n in names), scores.mass))
        read += scores.prompt_tokens
    ids = [p.passage_id for p in payload.passages]
    if not isinstance(payload, TierPayload):
        return score_reply(judge_id, ids, readings), read
    matches = match(payload.query, [p.text for p in payload.passages])
    snippets = [(m.sentence.text, m.sentence.score) for m in matches]
    return tier_reply(judge_id, ids, readings, snippets, scale), read


def grade_scale(tiers: Sequence[TierDefinition] = ()) -> list[TierDefinition]:
    """The tiers by grade: index ``g`` is the tier of grade ``g`` (0 = the least relevant).
    Empty ``tiers``: the default scheme's."""
    ordered = list(tiers or DEFAULT_TIERS.tiers)
    if len(ordered) < 2:
        raise ConfigError(f"a tier scheme needs at least two tiers, got {len(ordered)}")
    return ordered[::-1]


def grade_messages(
    scale: Sequence[TierDefinition], query: str, passage: str
) -> list[dict[str, str]]:
    """The grading prompt of one passage. Everything before the passage is the same for every
    passage of a request, so the KV cache of the previous prompt covers it."""
    lines = "\n".join(f"- {t.name}: {t.definition}" for t in reversed(list(scale)))
    user = USER.replace("[QUERY]", query).replace("[PASSAGE]", passage)
    return [
        {"role": "system", "content": SYSTEM.replace("[SCALE]", lines)},
        {"role": "user", "content": user},
    ]


@dataclass(frozen=True)
class GradeReading:
    """One passage's grade distribution, read from the model."""

    probabilities: tuple[float, ...]
    """``probabilities[g]``: the model's probability of the tier of grade ``g`` as its reply,
    renormalised over the tiers."""
    mass: float
    """How much of the model's probability the tier names held."""

    @property
    def grade(self) -> int:
        """The most probable grade (the lower one on a tie)."""
        return max(range(len(self.probabilities)), key=lambda g: (self.probabilities[g], -g))

    @property
    def expected(self) -> float:
        return sum(g * p for g, p in enumerate(self.probabilities))

    def words(self) -> str:
        shown = " ".join(
            f"p({g})={p:.2f}" for g, p in reversed(list(enumerate(self.probabilities)))
        )
        return f"{shown}, the tier names' share of the model's probability {self.mass:.2f}"


def tier_reply(
    judge_id: str,
    ids: Sequence[str],
    readings: Sequence[GradeReading],
    snippets: Sequence[tuple[str, float]],
    scale: Sequence[TierDefinition],
) -> dict[str, Any]:
    """A tier reply: each passage in the tier of its most probable grade. ``snippets`` are
    each passage's best-matching sentence and its cosine (the heuristic quoted as evidence)."""
    items = []
    for pid, reading, (sentence, cosine) in zip(ids, readings, snippets, strict=True):
        grade = reading.grade
        tier = scale[grade].name
        quoted = grade > 0
        evidence = (
            f"snippet: best-matching sentence (heuristic: MiniLM cosine {cosine:.2f}), "
            "not quoted by the model"
            if quoted
            else "no snippet (lowest grade)"
        )
        items.append(
            {
                "passage_id": pid,
                "tier": tier,
                "justification": (
                    f"{judge_id} grade distribution {reading.words()} (the model's "
                    f"probabilities of the tier names, mode=score): grade {grade} = "
                    f"{tier}; {evidence}"
                ),
                "key_evidence_snippet": sentence if quoted else None,
            }
        )
    counts = {TierScheme.count_key(t.name): 0 for t in scale}
    for item in items:
        counts[TierScheme.count_key(str(item["tier"]))] += 1
    return {"classifications": items, "tier_summary": counts}


def score_reply(
    judge_id: str, ids: Sequence[str], readings: Sequence[GradeReading]
) -> dict[str, Any]:
    """The pointwise score step's reply: each passage's expected grade."""
    top = len(readings[0].probabilities) - 1 if readings else 0
    pool = [
        PoolScore(
            r.expected,
            f"{judge_id} expected grade {r.expected:.2f} of {top} from its grade distribution "
            f"{r.words()} (the model's probabilities of the tier names, mode=score)",
        )
        for r in readings
    ]
    return _grades.scores_reply(ids, pool)
