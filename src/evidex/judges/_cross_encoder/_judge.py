"""The ``local:cross-encoder`` judge and its options (see the package docstring)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from evidex.errors import ConfigError
from evidex.judges._cross_encoder._model import (
    JUDGE,
    PairModel,
    default_threads,
    locate_files,
    shared_model,
)
from evidex.judges._grades import (
    CutPoints,
    PoolScore,
    SentenceScore,
    sentence_spans,
    tier_reply,
)
from evidex.judges._options import parse_options
from evidex.judges._payload_judge import PayloadJudge

__all__ = ["DEFAULT_CUT_POINTS", "CrossEncoderJudge", "CrossEncoderOptions"]

DEFAULT_CUT_POINTS = (0.9, 0.5, 0.1)
"""Tier cut points on the score (the sigmoid of the logit) before any calibration. They are
not fitted on labelled data: an MS MARCO cross-encoder is trained to output the log-odds that a
passage is relevant, so these read as 'the model is sure' (0.9), 'more likely than not' (0.5)
and 'not ruled out' (0.1). Fit your own with ``evidex calibrate tier``."""


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class CrossEncoderOptions(BaseModel):
    """Options of ``local:cross-encoder``; a misspelled option is an error, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path = Field(description="the model directory: an ONNX graph beside tokenizer.json")
    model_file: str | None = Field(
        default=None,
        description="the graph's file name inside path; default: model.onnx, else "
        "model_quantized.onnx",
    )
    thresholds: tuple[float, ...] = Field(
        default=DEFAULT_CUT_POINTS,
        description="tier cut points on the score (sigmoid of the logit), most relevant first, "
        "as a comma list such as 0.9,0.5,0.1 (one fewer than the tiers; another count is "
        "re-spread); default: 0.9,0.5,0.1, not fitted",
    )
    max_length: int | None = Field(
        default=None,
        ge=16,
        le=8192,
        description="word pieces per (query, passage) pair; default: the tokenizer.json "
        "truncation length, else 512",
    )
    batch_size: int = Field(
        default=1,
        ge=1,
        le=512,
        description="pairs per run (length-sorted, padded to the longest); at 1 (the default) "
        "a pair's score never depends on its neighbours, as it would with an int8 graph's "
        "per-run activation scale",
    )
    threads: int | None = Field(
        default=None, ge=1, description="runs side by side, one onnxruntime thread each"
    )

    @field_validator("thresholds", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return tuple(float(v) for v in value.split(",") if v.strip())
            except ValueError:
                raise ValueError("must be a comma list of numbers such as 0.9,0.5,0.1") from None
        return value

    @field_validator("thresholds")
    @classmethod
    def _descending(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("needs at least one cut point")
        if any(not 0.0 <= v <= 1.0 for v in value):
            raise ValueError("cut points are on the sigmoid of the logit, between 0 and 1")
        if any(a <= b for a, b in itertools.pairwise(value)):
            raise ValueError("cut points must strictly descend (most relevant tier first)")
        return value


class CrossEncoderJudge(PayloadJudge):
    """The user's ONNX cross-encoder for tier and rerank: reads query and passage together,
    offline, and gives a relevance score, not a reading."""

    def __init__(self, options: CrossEncoderOptions, judge_id: str = JUDGE) -> None:
        super().__init__(judge_id)
        self.options = options
        self.thresholds = CutPoints(options.thresholds)
        """The tier cut points, spread to any scheme's tier count (what a cascade reads)."""
        self.files = locate_files(Path(options.path), options.model_file)
        threads = options.threads or default_threads()
        self.model: PairModel = shared_model(self.files, threads, options.max_length)
        self.context_window = self.model.max_length

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> CrossEncoderJudge:
        """Build from ``local:cross-encoder`` and options (``path=DIR`` is required)."""
        if spec != JUDGE:
            raise ConfigError(f"the cross-encoder judge answers to {JUDGE!r}, not {spec!r}")
        if "path" not in options:
            raise ConfigError(
                f"{JUDGE} needs path=DIR, a directory with an ONNX cross-encoder and its "
                "tokenizer.json (export one with: optimum-cli export onnx --model "
                "cross-encoder/ms-marco-MiniLM-L-6-v2 DIR)"
            )
        return cls(parse_options(CrossEncoderOptions, options, spec), spec)

    # ------------------------------------------------------------------ identity

    @property
    def cut_points(self) -> tuple[float, ...]:
        """The cut points as given, most relevant first."""
        return self.thresholds.points

    def cut_points_option(self, cut_points: Sequence[float]) -> str:
        """The judge option that grades with ``cut_points`` (what calibration prints)."""
        return "thresholds=" + ",".join(f"{c:.4g}" for c in cut_points)

    @property
    def model_version(self) -> str:
        f = self.files
        given = "" if self.cut_points != DEFAULT_CUT_POINTS else ", default"
        return (
            f"cross-encoder {f.model.parent.name}/{f.model.name} (onnx-sha256:"
            f"{f.model_sha256[:12]}; tokenizer {f.tokenizer_sha256[:12]}; "
            f"{self.model.max_length} word pieces; "
            f"cut points {'/'.join(f'{c:g}' for c in self.cut_points)}{given})"
        )

    def fingerprint(self) -> Mapping[str, Any]:
        return {
            "model_sha256": self.files.model_sha256,
            "tokenizer_sha256": self.files.tokenizer_sha256,
            "max_length": self.model.max_length,
            "query_tokens": self.model.query_limit,
            "output": self.model.output_kind,
            "cut_points": list(self.cut_points),
        }

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` by the model's own tokenizer (no special tokens)."""
        return self.model.count(text)

    def passage_token_limit(self, overhead_tokens: int, batch_size: int) -> int:
        """Each passage is read in a pair with the query: what the pair length leaves after
        the special tokens and the longest query a pair keeps."""
        return self.model.max_length - self.model.special - self.model.query_limit

    def query_token_limit(self) -> int:
        return self.model.query_limit

    # ------------------------------------------------------------------ scoring API

    def logits(self, query: str, texts: Sequence[str]) -> list[float]:
        """The raw relevance logit of each (query, text) pair."""
        values, _ = self.model.logits(query, texts, batch_size=self.options.batch_size)
        return [float(v) for v in values]

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """The sigmoid of each pair's logit, in [0, 1]; higher is more relevant. The tier cut
        points and ``evidex calibrate tier`` use this scale."""
        return [_sigmoid(v) for v in self.logits(query, texts)]

    def best_sentences(self, query: str, text: str) -> list[SentenceScore]:
        """The sentences of ``text``, each scored as a pair with ``query``, best first."""
        spans = sentence_spans(text) or [(0, len(text))]
        scores = self.score(query, [text[s:e] for s, e in spans])
        scored = [
            SentenceScore(text[s:e], s, e, v) for (s, e), v in zip(spans, scores, strict=True)
        ]
        return sorted(scored, key=lambda x: -x.score)

    # ------------------------------------------------------------------ the judge call

    def pool_scores(self, query: str, texts: Sequence[str]) -> tuple[list[PoolScore], int]:
        logits, read = self.model.logits(query, texts, batch_size=self.options.batch_size)
        pool = [
            PoolScore(
                _sigmoid(float(v)),
                f"cross-encoder relevance {_sigmoid(float(v)):.3f} (sigmoid of logit "
                f"{float(v):.2f}; a trained score of the pair, not a reading)",
            )
            for v in logits
        ]
        return pool, read

    def tier_reply(
        self, query: str, ids: list[str], texts: list[str], tiers: list[str]
    ) -> tuple[dict[str, Any], int]:
        """Tier by the passage's own score; the snippet is its best sentence, each sentence
        of a passage of several scored as a pair with the query in the same runs."""
        spans = [sentence_spans(t) or [(0, len(t))] for t in texts]
        pieces = list(texts)
        rows: list[list[int]] = []
        for text, text_spans in zip(texts, spans, strict=True):
            if len(text_spans) == 1:
                rows.append([-1])  # the passage is its one sentence
                continue
            rows.append(list(range(len(pieces), len(pieces) + len(text_spans))))
            pieces += [text[s:e] for s, e in text_spans]
        logits, read = self.model.logits(query, pieces, batch_size=self.options.batch_size)
        scores = [_sigmoid(float(v)) for v in logits]
        best: list[SentenceScore] = []
        for index, (text, text_spans, own) in enumerate(zip(texts, spans, rows, strict=True)):
            sentence_scores = [scores[r] if r >= 0 else scores[index] for r in own]
            k = int(np.argmax(sentence_scores))
            s, e = text_spans[k]
            best.append(SentenceScore(text[s:e], s, e, sentence_scores[k]))

        def explain(i: int, spread: str, verdict: str) -> str:
            return (
                f"cross-encoder relevance{spread} {scores[i]:.3f} (sigmoid of logit "
                f"{float(logits[i]):.2f}; a trained score of the pair, not a reading) {verdict}; "
                f"best-matching sentence (the snippet) scores {best[i].score:.3f}"
            )

        reply = tier_reply(
            self.cut_points, ids, scores[: len(texts)], [b.text for b in best], tiers, explain
        )
        return reply, read
