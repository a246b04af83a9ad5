"""The options of the judges run by llama.cpp (``local:qwen``, ``local:gguf``).

Apart from :mod:`evidex.judges._qwen` so that module keeps to the machinery: these are the
user-facing knobs, each with why its default is what it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LlamaOptions", "QwenOptions"]


class LlamaOptions(BaseModel):
    """Options of the judges run by llama.cpp (``local:qwen``, ``local:gguf``); a misspelled
    option is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["score", "generate"] = "generate"
    """How tier and pointwise rerank requests are answered. ``generate``: the model writes the
    reply JSON (justification and quote included) under the schema's grammar. ``score``: one
    short Yes/No question per passage ("does the passage answer the query?"), its relevance
    ``s = p(Yes) / (p(Yes) + p(No))`` read from the model's distribution, nothing generated;
    rerank scores by ``s``, tiers cut ``s`` by fitted cut points, the justification gives
    ``s`` and the cut point, and the snippet is the best-matching sentence by
    ``local:minilm`` (a heuristic, named as one; see :mod:`evidex.judges._qwen_grades`). The
    audit in ``score`` mode: code splits the answer and quotes the encoder's candidate
    sentences, the model grades each claim by two Yes/No prompts (see
    :mod:`evidex.judges._qwen_audit`). Classify in ``score`` mode: one Yes/No question per
    label about the encoder's candidate sentences (see :mod:`evidex.judges._qwen_classify`).
    Other payloads ``score`` mode answers are listed in :mod:`evidex.judges._qwen_scorers`.
    The mode is one per judge instance, for every job it runs; it is in the model version,
    so the audit log says which mode judged. ``generate`` is the judge's own default, and
    each job may register another for the judge it builds from a spec string
    (:mod:`evidex._registered`): the jobs that grade claims or labels against evidence take
    ``score``, where it measures best with the shipped 1.5B model (docs/benchmarks.md:
    ``audit_wice``, ``classify_scifact_score``), while tier keeps ``generate`` (``score``
    tiered 40 LLMJudge pairs at kappa -0.02 against 0.17, ``qwen_modes_agreement``)."""
    n_ctx: int = Field(default=4096, ge=1024, le=32768)
    """Context window in tokens. 4096 holds a tier batch of 5 with its re-asks."""
    n_threads: int | None = Field(default=None, ge=1)
    """CPU threads; default: ``EVIDEX_QWEN_THREADS``, else every core this process may use.
    llama.cpp's threads spin while they wait for each other, so on a machine already busy with
    other work fewer threads can be much faster (measured on 2 cores at load 10: 2.9 generated
    tokens/s with 1 thread, 0.2 with 2); set 1 there."""
    seed: int = 20240607
    """Sampling seed, fixed so a run can be repeated."""
    reuse_prefix: bool = True
    """Keep the KV cache of the previous prompt (off only to measure what it saves)."""
    draft: bool = True
    """Prompt-lookup drafts while writing the reply (off only to measure what they save; the
    reply is drawn from the same distribution either way)."""


class QwenOptions(LlamaOptions):
    """Options of ``local:qwen``."""

    cache_dir: Path | None = None
    """Where the joined weights live; default: the user cache dir of evidex."""
