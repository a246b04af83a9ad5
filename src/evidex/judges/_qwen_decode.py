"""Grammar-constrained decoding for ``local:qwen``, written for a laptop CPU.

On two cores, writing the reply takes most of a judge call (a tier batch of five: about 340
generated tokens against 1,400 prompt tokens, which evaluate five times faster each), so this
loop replaces llama-cpp-python's generic one with two changes, both measured on tier batches
(``bench/qwen_speed.py``):

- **The grammar checks the drawn token first.** llama-cpp-python runs the JSON grammar over all
  152k vocabulary entries before every token. Here the sampler draws from the model's own
  distribution and the grammar checks that one token; only when it breaks the grammar is the
  whole vocabulary masked and the token drawn again. llama.cpp's own server samples this way.
- **Prompt-lookup drafts.** Much of a reply repeats text that is already in the context: the JSON
  keys of the reply format, passage ids, snippets copied word for word. After each token the
  tokens that followed the latest earlier occurrence of the last two or three tokens are proposed
  as a draft, and the model evaluates the token and its draft in one batch (cheaper per token
  than one call each). Each draft token is kept only if it is the token the sampler draws at
  that position, so the reply is drawn from the same distribution as without drafts.

The decoder owns the KV cache of its context and remembers which tokens it holds, so the next
prompt re-evaluates only what follows the longest shared prefix.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ConstrainedDecoder", "ContextOverflow", "Decoded", "lookup_draft"]

MAX_NGRAM = 3
"""Longest n-gram looked up for a draft; longer matches predict the continuation better."""
MIN_NGRAM = 2
"""Shortest n-gram looked up: a single token repeats too often to predict what follows it."""
MAX_DRAFT = 5
"""Longest draft. A batch costs more with every token it holds (each needs its logits over the
whole vocabulary), and the tokens after a miss are thrown away."""


class ContextOverflow(ValueError):
    """The prompt (or the prompt plus one reply token) does not fit the context window."""


@dataclass(frozen=True)
class Decoded:
    """One reply and what it cost."""

    text: str
    finish_reason: str
    """``stop`` when the grammar completed and the model ended the reply, ``length`` when the
    reply hit ``max_tokens`` or the end of the context window."""
    prompt_tokens: int
    prompt_evaluated: int
    """Prompt tokens evaluated; the rest were already in the KV cache."""
    prompt_eval_s: float
    completion_tokens: int
    generation_s: float
    """Writing the reply: evaluating drafts and drawn tokens, sampling and grammar checks."""
    drafted: int
    accepted: int


class ConstrainedDecoder:
    """Samples grammar-constrained replies from one ``llama_cpp.Llama``; not thread-safe (the
    caller holds the model's lock)."""

    def __init__(self, llama: Any, llama_cpp: Any) -> None:
        self._lib = llama_cpp
        self._llama = llama
        self._ctx = llama.ctx
        self._vocab = llama_cpp.llama_model_get_vocab(llama.model)
        self._n_vocab = llama.n_vocab()
        self._n_ctx = llama.n_ctx()
        self._n_batch = llama.n_batch
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._vocab_table = (llama_cpp.llama_token_data * self._n_vocab)()
        """Scratch for the rare draw over the whole vocabulary (allocated once: 1.8 MB)."""
        self._cached: list[int] = []
        """Tokens whose KV entries are in the context, in position order."""

    def close(self) -> None:
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None

    def reset(self) -> None:
        """Forget the KV cache, so the next prompt is evaluated in full."""
        self._forget_from(0)

    # ------------------------------------------------------------------ public

    def complete(
        self,
        prompt: Sequence[int],
        grammar: str,
        *,
        temperature: float,
        max_tokens: int,
        seed: int,
        draft: bool = True,
    ) -> Decoded:
        """Evaluate ``prompt`` (reusing the cached prefix) and sample a reply ``grammar`` allows."""
        prompt = list(prompt)
        if len(prompt) >= self._n_ctx:
            raise ContextOverflow(
                f"the prompt has {len(prompt)} tokens, more than the context window of "
                f"{self._n_ctx} leaves for a reply"
            )
        max_tokens = min(max_tokens, self._n_ctx - len(prompt))
        started = time.perf_counter()
        evaluated = self._evaluate_prompt(prompt)
        prompt_eval_s = time.perf_counter() - started
        sampler = _Sampler(
            self._lib, self._ctx, self._vocab, self._vocab_table, grammar, temperature, seed
        )
        try:
            reply, finish, drafted, accepted = self._generate(
                prompt, sampler, max_tokens=max_tokens, draft=draft
            )
        finally:
            sampler.close()
        return Decoded(
            text=self._detokenize(reply),
            finish_reason=finish,
            prompt_tokens=len(prompt),
            prompt_evaluated=evaluated,
            prompt_eval_s=prompt_eval_s,
            completion_tokens=len(reply),
            generation_s=time.perf_counter() - started - prompt_eval_s,
            drafted=drafted,
            accepted=accepted,
        )

    def evaluate(self, prompt: Sequence[int]) -> int:
        """Evaluate ``prompt``, reusing the cached prefix, and return how many of its tokens were
        evaluated; afterwards :meth:`logits` ``(-1)`` holds the next-token logits."""
        prompt = list(prompt)
        if not prompt or len(prompt) >= self._n_ctx:
            raise ContextOverflow(
                f"the prompt has {len(prompt)} tokens; the context window holds {self._n_ctx}"
            )
        return self._evaluate_prompt(prompt)

    def extend(self, tokens: Sequence[int]) -> None:
        """Evaluate ``tokens`` after the cached ones with logits for every one of them (row
        ``i`` of :meth:`logits` is the distribution after ``tokens[i]``)."""
        if len(self._cached) + len(tokens) > self._n_ctx:
            raise ContextOverflow(f"{len(tokens)} more tokens overflow the context window")
        if tokens:
            self._decode(tokens, all_logits=True)

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` cached tokens (undo an :meth:`extend`)."""
        self._forget_from(length)

    def logits(self, row: int) -> np.ndarray:
        """A copy of the logits of output ``row`` of the last evaluation (-1: the last)."""
        pointer = self._lib.llama_get_logits_ith(self._ctx, row)
        return np.ctypeslib.as_array(pointer, (self._n_vocab,)).astype(np.float64)

    # ------------------------------------------------------------------ steps

    def _evaluate_prompt(self, prompt: list[int]) -> int:
        shared = 0
        for cached, token in zip(self._cached, prompt, strict=False):
            if cached != token:
                break
            shared += 1
        # The last prompt token is always evaluated again: its logits draw the first reply token.
        shared = min(shared, len(prompt) - 1)
        self._forget_from(shared)
        self._decode(prompt[shared:], all_logits=False)
        return len(prompt) - shared

    def _generate(
        self, prompt: list[int], sampler: _Sampler, *, max_tokens: int, draft: bool
    ) -> tuple[list[int], str, int, int]:
        reply: list[int] = []
        drafted = accepted = 0
        token = sampler.sample(-1)
        while True:
            if self._lib.llama_vocab_is_eog(self._vocab, token):
                return reply, "stop", drafted, accepted
            reply.append(token)
            if len(reply) >= max_tokens:
                return reply, "length", drafted, accepted
            proposal = lookup_draft(prompt + reply) if draft else []
            proposal = proposal[: max_tokens - len(reply)]
            drafted += len(proposal)
            # Row 0 holds the logits after `token`, row i those after proposal[i - 1].
            self._decode([token, *proposal], all_logits=True)
            next_token = None
            for row, guess in enumerate(proposal):
                drawn = sampler.sample(row)
                if drawn != guess:
                    next_token = drawn
                    self._forget_from(len(self._cached) - len(proposal) + row)
                    break
                accepted += 1
                if self._lib.llama_vocab_is_eog(self._vocab, drawn):
                    return reply, "stop", drafted, accepted
                reply.append(drawn)
                if len(reply) >= max_tokens:
                    return reply, "length", drafted, accepted
            token = next_token if next_token is not None else sampler.sample(len(proposal))

    def _decode(self, tokens: Sequence[int], *, all_logits: bool) -> None:
        """Evaluate ``tokens`` after the cached ones, in chunks of the batch size; logits for
        every token (to check a draft) or only for the last one (a prompt)."""
        batch = self._batch
        for start in range(0, len(tokens), self._n_batch):
            chunk = tokens[start : start + self._n_batch]
            n_past = len(self._cached)
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = n_past + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = all_logits
            batch.logits[len(chunk) - 1] = True
            status = self._lib.llama_decode(self._ctx, batch)
            if status != 0:
                self._forget_from(n_past)
                raise RuntimeError(f"llama_decode returned {status}")
            self._cached.extend(chunk)

    def _forget_from(self, position: int) -> None:
        memory = self._lib.llama_get_memory(self._ctx)
        self._lib.llama_memory_seq_rm(memory, -1, position, -1)
        del self._cached[position:]

    def _detokenize(self, tokens: list[int]) -> str:
        text: bytes = self._llama.detokenize(tokens)
        return text.decode("utf-8", errors="replace")


class _Sampler:
    """The sampler chain of one reply (llama-cpp-python's defaults) and its grammar."""

    def __init__(
        self,
        lib: Any,
        ctx: Any,
        vocab: Any,
        vocab_table: Any,
        grammar: str,
        temperature: float,
        seed: int,
    ) -> None:
        self._lib = lib
        self._ctx = ctx
        self._vocab_table = vocab_table
        self.chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if temperature <= 0:
            self._add(lib.llama_sampler_init_greedy())
        else:
            self._add(lib.llama_sampler_init_top_k(40))
            self._add(lib.llama_sampler_init_top_p(0.95, 1))
            self._add(lib.llama_sampler_init_min_p(0.05, 1))
            self._add(lib.llama_sampler_init_temp(temperature))
            self._add(lib.llama_sampler_init_dist(seed))
        self.grammar = lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
        if not self.grammar:
            self.close()
            raise ValueError("llama.cpp could not parse the reply grammar")

    def _add(self, sampler: Any) -> None:
        self._lib.llama_sampler_chain_add(self.chain, sampler)

    def sample(self, row: int) -> int:
        """Draw a token from the logits of output ``row``; the grammar then accepts it."""
        lib = self._lib
        token = int(lib.llama_sampler_sample(self.chain, self._ctx, row))
        if not self._allows(token):
            token = self._resample(row)
        lib.llama_sampler_accept(self.grammar, token)
        return token

    def _allows(self, token: int) -> bool:
        one = (self._lib.llama_token_data * 1)(self._lib.llama_token_data(token, 0.0, 0.0))
        candidates = self._lib.llama_token_data_array(one, 1, -1, False)
        self._lib.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        return bool(one[0].logit != float("-inf"))

    def _resample(self, row: int) -> int:
        """Mask the whole vocabulary by the grammar, then draw again."""
        lib = self._lib
        n_vocab = len(self._vocab_table)
        table = np.ctypeslib.as_array(self._vocab_table)  # a view of the ctypes array
        table["id"] = np.arange(n_vocab, dtype=np.int32)
        logits = lib.llama_get_logits_ith(self._ctx, row)
        table["logit"] = np.ctypeslib.as_array(logits, (n_vocab,))
        table["p"] = 0.0
        candidates = lib.llama_token_data_array(self._vocab_table, n_vocab, -1, False)
        lib.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        lib.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        return int(self._vocab_table[candidates.selected].id)

    def close(self) -> None:
        if self.chain:
            self._lib.llama_sampler_free(self.chain)
            self.chain = None
        if getattr(self, "grammar", None):
            self._lib.llama_sampler_free(self.grammar)
            self.grammar = None


def lookup_draft(tokens: Sequence[int]) -> list[int]:
    """The tokens that followed the latest earlier occurrence of the last ``MAX_NGRAM`` (down to
    ``MIN_NGRAM``) tokens; empty when they never occurred before."""
    end = len(tokens)
    for n in range(MAX_NGRAM, MIN_NGRAM - 1, -1):
        if end <= n:
            continue
        tail = list(tokens[end - n :])
        for start in range(end - n - 1, -1, -1):
            if tokens[start] == tail[0] and list(tokens[start : start + n]) == tail:
                return list(tokens[start + n : start + n + MAX_DRAFT])
    return []
