"""The MiniLM encoder: the pinned tokenizer and one ONNX session, shared within a process.

Texts are tokenised by the model's own ``tokenizer.json`` (checked against its sha256 before
use), capped at :data:`MAX_SEQ_LEN` word pieces, sorted by length and run in batches padded
to each batch's longest text; the embedding is the mask-weighted mean of the last hidden
state, scaled to unit length. Embeddings of texts run alone are kept in a bounded LRU cache
(:mod:`._embed_cache`), so a text met again is not encoded again. onnxruntime and tokenizers
are core dependencies imported on first use, so a broken install says what to reinstall.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from evidex.errors import ConfigError
from evidex.judges._onnx import (
    MissingDependencyError,
    import_dependency,
    length_chunks,
    open_session,
    run_chunks,
    worker_pool,
)
from evidex.judges.minilm._data import read_data
from evidex.judges.minilm._embed_cache import Embedding, EmbeddingCache, text_key

__all__ = [
    "MAX_SEQ_LEN",
    "SPECIAL_TOKENS",
    "TOKENIZER_SHA256",
    "Encoder",
    "MissingDependencyError",
    "Vectors",
    "import_dependency",
    "read_tokenizer",
    "shared_encoder",
]

TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_SEQ_LEN = 256
"""Word pieces per sequence, [CLS] and [SEP] included (the model's training length)."""
SPECIAL_TOKENS = 2
"""[CLS] and [SEP]: the part of :data:`MAX_SEQ_LEN` that is not the text."""

Vectors = npt.NDArray[np.float32]


def read_tokenizer(path: Path | None) -> tuple[str, str]:
    """The tokenizer JSON (default: the vendored copy) and its sha256, which must be pinned."""
    raw, where = read_data(path, "tokenizer.json")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != TOKENIZER_SHA256:
        raise ConfigError(
            f"{where}: tokenizer sha256 is {digest}, expected {TOKENIZER_SHA256}; the file "
            "is not the all-MiniLM-L6-v2 tokenizer the model was trained with (corrupt or "
            "replaced). Reinstall evidex or point tokenizer_path at the right file."
        )
    return raw.decode("utf-8"), digest


class Encoder:
    """Tokenizer + ONNX session (and embedding cache), loaded once per process per (model,
    tokenizer, threads, cache size).

    Batches run concurrently on ``threads`` workers, each run on one onnxruntime thread (see
    :mod:`evidex.judges._onnx` for why). ``cache_entries`` bounds the embedding cache (0: none).
    """

    def __init__(
        self, model_path: Path, tokenizer_json: str, threads: int, cache_entries: int = 0
    ) -> None:
        tokenizers = import_dependency("tokenizers", "tokenizers>=0.15")
        self.tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json)
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.sep_id = int(self.tokenizer.token_to_id("[SEP]"))
        self.session = open_session(model_path, "the MiniLM ONNX model", "local:minilm")
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.dim = int(self.session.get_outputs()[0].shape[-1])
        self.workers = worker_pool(threads, "evidex-minilm")
        self.cache = EmbeddingCache(cache_entries) if cache_entries else None

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, pad_to: int | None = None
    ) -> tuple[Vectors, int]:
        """Unit-length sentence embeddings of ``texts`` and the word pieces read.

        Texts are sorted by length and batched, each batch padded to its own longest text
        (``pad_to`` forces a fixed length instead; the benchmark uses it for comparison).

        With ``batch_size`` 1 and no ``pad_to`` each text runs alone, unpadded, so its
        embedding is a function of the text: those are served from the cache and stored in it,
        each distinct text of the call encoded at most once, with the same vectors bit for bit
        and the same word-piece total (duplicates and cached texts included) as without it.
        Any other call bypasses the cache: in a batch a text is padded to its neighbours'
        length, and with int8 compute the activations of a run share one quantization scale,
        so a batched embedding depends on the texts beside it.
        """
        if self.cache is None or batch_size != 1 or pad_to is not None:
            ids = self._word_pieces(texts)
            return self._embed(ids, batch_size, pad_to), sum(len(seq) for seq in ids)
        keys = [text_key(t) for t in texts]
        found = self.cache.get_many(keys)
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if missing:
            ids = self._word_pieces(list(missing.values()))
            vectors = self._embed(ids, 1, None)
            new: dict[bytes, Embedding] = {
                k: (vectors[i], len(ids[i])) for i, k in enumerate(missing)
            }
            self.cache.put_many(new)
            found.update(new)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, k in enumerate(keys):
            out[row] = found[k][0]
        return out, sum(found[k][1] for k in keys)

    def _word_pieces(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's word-piece ids with [CLS] and [SEP], cut to :data:`MAX_SEQ_LEN`."""
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        return [
            seq if len(seq) <= MAX_SEQ_LEN else [*seq[: MAX_SEQ_LEN - 1], self.sep_id]
            for seq in ids
        ]

    def _embed(self, ids: list[list[int]], batch_size: int, pad_to: int | None) -> Vectors:
        """The embeddings of ``ids``, run in length-sorted batches on the worker pool."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        chunks = length_chunks([len(seq) for seq in ids], batch_size)

        def run(chunk: list[int]) -> Vectors:
            width = pad_to or max(len(ids[i]) for i in chunk)
            input_ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                input_ids[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            return self._run(input_ids, mask)

        for chunk, vectors in zip(chunks, run_chunks(self.workers, chunks, run), strict=True):
            out[chunk] = vectors
        return out

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


_ENCODERS: dict[tuple[str, str, int, int], Encoder] = {}
_ENCODERS_LOCK = threading.Lock()


def shared_encoder(
    model_path: Path, tokenizer_json: str, tokenizer_sha: str, threads: int, cache_entries: int
) -> Encoder:
    """The process's encoder for this model, tokenizer, thread count and cache size, built on
    first use. The cache size is part of the key, so a judge gets the cache it asked for (a
    process normally uses one size, so one encoder)."""
    key = (str(model_path), tokenizer_sha, threads, cache_entries)
    with _ENCODERS_LOCK:
        encoder = _ENCODERS.get(key)
        if encoder is None:
            encoder = _ENCODERS[key] = Encoder(model_path, tokenizer_json, threads, cache_entries)
        return encoder
