"""The rerank task: order candidate passages by relevance to a query, with justifications.

Three pure exchanges, one per kind of judge request:

- :class:`RerankStep` (:mod:`.listwise`) ranks a list of passages in one call (the spec's
  prompt). The ``allpairs`` strategy sends every candidate at once; ``listwise`` sends sliding
  windows of them.
- :class:`PairStep` (:mod:`.pairwise`) asks which of two passages is more relevant (the
  ``pairwise`` strategy).
- :class:`ScoreStep` (:mod:`.pointwise`) asks for one relevance score per passage (the
  ``pointwise`` strategy).

The grounding check (:class:`GroundingStep`, :mod:`.grounding`) grades the top-k of a ranking
with the tier prompt.

Beside them: the prompt templates (:mod:`.prompts`), the values and batches (:mod:`.models`),
the reply checks (:mod:`.checks`) and the justification flags (:mod:`.flags`). Orchestration
(the cut to ``top_n``, windows, the comparison sort, metrics) is in :mod:`evidex.jobs.rerank`.
"""

from evidex.tasks.rerank.flags import flag_event, justification_flag
from evidex.tasks.rerank.grounding import GroundingStep
from evidex.tasks.rerank.listwise import RerankStep
from evidex.tasks.rerank.models import (
    STRATEGIES,
    Exclusion,
    PairBatch,
    PairVerdict,
    PassageScore,
    RankedPassage,
    RerankBatch,
    RerankBatchValue,
    ScoreBatch,
    ScoreBatchValue,
)
from evidex.tasks.rerank.pairwise import PairStep
from evidex.tasks.rerank.pointwise import ScoreStep
from evidex.tasks.rerank.prompts import PAIR_TEMPLATE, RERANK_TEMPLATE, SCORE_TEMPLATE

__all__ = [
    "PAIR_TEMPLATE",
    "RERANK_TEMPLATE",
    "SCORE_TEMPLATE",
    "STRATEGIES",
    "Exclusion",
    "GroundingStep",
    "PairBatch",
    "PairStep",
    "PairVerdict",
    "PassageScore",
    "RankedPassage",
    "RerankBatch",
    "RerankBatchValue",
    "RerankStep",
    "ScoreBatch",
    "ScoreBatchValue",
    "ScoreStep",
    "flag_event",
    "justification_flag",
]
