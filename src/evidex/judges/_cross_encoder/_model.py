"""The user's cross-encoder files: found, checked, fingerprinted and run on (query, text) pairs.

A directory as ``optimum-cli export onnx`` writes it: an ONNX graph (``model.onnx``, or the
int8 ``model_quantized.onnx`` that ``optimum-cli onnxruntime quantize`` writes) beside the
model's ``tokenizer.json``. Nothing is downloaded: a missing directory or file, a file that is
not ONNX, or a graph that does not take ``input_ids`` and ``attention_mask`` (and optionally
``token_type_ids``) and return one relevance logit (``[batch, 1]``) or two class logits
(``[batch, 2]``) per pair is a :class:`~evidex.errors.ConfigError` naming the path. The graph
is checked by one tiny run when it is loaded, so a bad file fails when the judge is built,
not in the middle of a job.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evidex.errors import ConfigError
from evidex.judges._onnx import (
    import_dependency,
    length_chunks,
    open_session,
    run_chunks,
    worker_pool,
)
from evidex.judges._weights import file_sha256

__all__ = ["MODEL_FILES", "CrossEncoderFiles", "PairModel", "locate_files", "shared_model"]

JUDGE = "local:cross-encoder"
MODEL_FILES = ("model.onnx", "model_quantized.onnx")
"""The graph file names looked for, in this order, when ``model_file`` is not given."""
TOKENIZER_FILE = "tokenizer.json"
DEFAULT_MAX_LENGTH = 512
"""Word pieces per pair when ``tokenizer.json`` names no truncation length (BERT's limit)."""
QUERY_TOKENS = 64
"""Word pieces of the query a pair keeps (at most half the pair); the passage gets the rest."""

_INPUTS = {"input_ids", "attention_mask", "token_type_ids"}
_INT_TYPES: dict[str, type[np.integer[Any]]] = {
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}
Logits = npt.NDArray[np.float32]


@dataclass(frozen=True)
class CrossEncoderFiles:
    """The two files of a model directory, with their sha256 and the tokenizer's text."""

    model: Path
    model_sha256: str
    tokenizer_json: str
    tokenizer_sha256: str


_SHA_CACHE: dict[tuple[str, int, int], str] = {}
_SHA_LOCK = threading.Lock()


def cached_sha256(path: Path) -> str:
    """The file's sha256, hashed once per process for a given size and mtime (a 90 MB
    graph takes a noticeable fraction of a second to hash)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _SHA_LOCK:
        digest = _SHA_CACHE.get(key)
    if digest is None:
        digest = file_sha256(path)
        with _SHA_LOCK:
            _SHA_CACHE[key] = digest
    return digest


def locate_files(directory: Path, model_file: str | None) -> CrossEncoderFiles:
    """The model and tokenizer files of ``directory``, or a :class:`ConfigError` saying which
    one is missing and how such a directory is made."""
    hint = (
        "export one with: optimum-cli export onnx --model cross-encoder/ms-marco-MiniLM-L-6-v2 "
        "DIR (weights are never downloaded at run time)"
    )
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ConfigError(f"{directory}: the {JUDGE} model directory {what}; {hint}")
    if model_file is not None:
        model = directory / model_file
        if not model.is_file():
            raise ConfigError(f"{model}: no such model file (model_file={model_file!r})")
    else:
        found = [directory / name for name in MODEL_FILES if (directory / name).is_file()]
        if not found:
            others = sorted(p.name for p in directory.glob("*.onnx"))
            also = f" (it has {', '.join(others)}: name one with model_file=)" if others else ""
            raise ConfigError(
                f"{directory}: no {' or '.join(MODEL_FILES)} in the {JUDGE} model "
                f"directory{also}; {hint}"
            )
        model = found[0]
    tokenizer = directory / TOKENIZER_FILE
    try:
        raw = tokenizer.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{tokenizer}: cannot read the model's tokenizer ({exc.strerror or exc}); the "
            f"export writes it beside the graph; {hint}"
        ) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{tokenizer}: not a tokenizer.json (not UTF-8 text)") from exc
    return CrossEncoderFiles(model, cached_sha256(model), text, hashlib.sha256(raw).hexdigest())


class PairModel:
    """Tokenizer + ONNX session of one cross-encoder, loaded once per process.

    A pair is tokenised by the model's own template (``[CLS] query [SEP] passage [SEP]`` for
    BERT models, with token type ids 0 then 1): the query is cut to :attr:`query_limit` word
    pieces, the passage to what the pair's ``max_length`` leaves. Pairs are sorted by length
    and run in batches padded to their own longest pair, side by side on ``threads`` workers.
    """

    def __init__(self, files: CrossEncoderFiles, threads: int, max_length: int | None) -> None:
        tokenizers = import_dependency("tokenizers", "tokenizers>=0.15", JUDGE)
        where = files.model.parent / TOKENIZER_FILE
        try:
            self.tokenizer = tokenizers.Tokenizer.from_str(files.tokenizer_json)
        except Exception as exc:  # tokenizers raises its own untyped errors
            raise ConfigError(f"{where}: not a valid tokenizer.json: {exc}") from exc
        truncation = self.tokenizer.truncation or {}
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.max_length = int(max_length or truncation.get("max_length") or DEFAULT_MAX_LENGTH)
        self.special = int(self.tokenizer.num_special_tokens_to_add(True))
        self.query_limit = min(QUERY_TOKENS, (self.max_length - self.special) // 2)
        if self.query_limit < 1:
            raise ConfigError(f"max_length {self.max_length} leaves no room for a pair")
        self.session = open_session(files.model, "the cross-encoder ONNX graph", JUDGE)
        self._check_graph(files.model)
        self.workers = worker_pool(threads, "evidex-cross-encoder")
        self.output_kind = self._probe(files.model)

    def _check_graph(self, path: Path) -> None:
        inputs = {i.name: i.type for i in self.session.get_inputs()}
        expected = "input_ids and attention_mask (and optionally token_type_ids)"
        if not {"input_ids", "attention_mask"} <= set(inputs) or set(inputs) - _INPUTS:
            raise ConfigError(
                f"{path}: the graph takes {sorted(inputs)}; a cross-encoder graph takes {expected}"
            )
        bad = {n: t for n, t in inputs.items() if t not in _INT_TYPES}
        if bad:
            raise ConfigError(f"{path}: inputs {bad} are not int64 or int32 tensors")
        self.input_types = {n: _INT_TYPES[t] for n, t in inputs.items()}
        output = self.session.get_outputs()[0]
        self.output_name = output.name
        shape = list(output.shape or [])
        last = shape[-1] if shape else None
        if len(shape) != 2 or (isinstance(last, int) and last not in (1, 2)):
            raise ConfigError(
                f"{path}: the graph's first output {output.name!r} has shape {shape}; a "
                "cross-encoder returns [batch, 1] relevance logits or [batch, 2] class logits"
            )

    def _probe(self, path: Path) -> str:
        """One tiny pair through the graph: what its output is, or why it cannot be used."""
        try:
            out = self._run([self._pair_ids("a", "b")])
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ConfigError(
                f"{path}: the graph does not run on a (query, passage) pair: {exc}"
            ) from exc
        if out.ndim != 2 or out.shape[1] not in (1, 2):
            raise ConfigError(
                f"{path}: the graph returned shape {list(out.shape)} for one pair; a "
                "cross-encoder returns [batch, 1] or [batch, 2] logits"
            )
        return "one logit" if out.shape[1] == 1 else "two class logits"

    # ------------------------------------------------------------------ tokens

    def count(self, text: str) -> int:
        """Word pieces of ``text`` alone (no special tokens, no truncation)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def cut_query(self, query: str) -> str:
        """The part of ``query`` a pair reads: its first :attr:`query_limit` word pieces."""
        encoding = self.tokenizer.encode(query, add_special_tokens=False)
        if len(encoding.ids) <= self.query_limit:
            return query
        return query[: encoding.offsets[self.query_limit - 1][1]]

    def _pair_ids(self, query: str, text: str) -> tuple[list[int], list[int]]:
        return self._pairs(query, [text])[0]

    def _pairs(self, query: str, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """Token and type ids of each (query, text) pair, by the model's own template."""
        q = self.tokenizer.encode(self.cut_query(query), add_special_tokens=False)
        room = self.max_length - self.special - len(q.ids)
        out = []
        for t in self.tokenizer.encode_batch(list(texts), add_special_tokens=False):
            t.truncate(room)
            pair = self.tokenizer.post_process(q, t, add_special_tokens=True)
            out.append((list(pair.ids), list(pair.type_ids)))
        return out

    # ------------------------------------------------------------------ runs

    def logits(self, query: str, texts: Sequence[str], *, batch_size: int) -> tuple[Logits, int]:
        """The relevance logit of each (query, text) pair and the word pieces read.

        A graph with two outputs per pair gives ``logit[1] - logit[0]``, whose sigmoid is the
        softmax probability of the second (relevant) class.
        """
        pairs = self._pairs(query, texts)
        out = np.zeros(len(pairs), dtype=np.float32)
        chunks = length_chunks([len(ids) for ids, _ in pairs], batch_size)

        def run(chunk: list[int]) -> Logits:
            raw = self._run([pairs[i] for i in chunk])
            if raw.ndim != 2 or raw.shape[1] not in (1, 2) or raw.shape[0] != len(chunk):
                raise ConfigError(
                    f"the cross-encoder graph returned shape {list(raw.shape)} for "
                    f"{len(chunk)} pairs; expected [{len(chunk)}, 1] or [{len(chunk)}, 2]"
                )
            single: Logits = raw[:, 0] if raw.shape[1] == 1 else raw[:, 1] - raw[:, 0]
            return single

        for chunk, values in zip(chunks, run_chunks(self.workers, chunks, run), strict=True):
            out[chunk] = values
        return out, sum(len(ids) for ids, _ in pairs)

    def _run(self, pairs: Sequence[tuple[list[int], list[int]]]) -> Logits:
        width = max(len(ids) for ids, _ in pairs)
        input_ids = np.zeros((len(pairs), width), dtype=np.int64)
        types = np.zeros_like(input_ids)
        mask = np.zeros_like(input_ids)
        for row, (ids, type_ids) in enumerate(pairs):
            input_ids[row, : len(ids)] = ids
            types[row, : len(ids)] = type_ids
            mask[row, : len(ids)] = 1
        arrays = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": types}
        feeds = {n: arrays[n].astype(dtype) for n, dtype in self.input_types.items()}
        result = self.session.run([self.output_name], feeds)[0]
        logits: Logits = np.asarray(result, dtype=np.float32)
        return logits


_MODELS: dict[tuple[str, str, str, int, int | None], PairModel] = {}
_MODELS_LOCK = threading.Lock()


def shared_model(files: CrossEncoderFiles, threads: int, max_length: int | None) -> PairModel:
    """The process's model for these files (by sha256), threads and length, built once."""
    key = (str(files.model), files.model_sha256, files.tokenizer_sha256, threads, max_length)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _MODELS[key] = PairModel(files, threads, max_length)
        return model


def default_threads() -> int:
    """Runs side by side: one per core."""
    return os.cpu_count() or 1
