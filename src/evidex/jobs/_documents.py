"""How a job serves the framework adapters, declared in its definition.

An adapter (LangChain, LlamaIndex, Haystack) hands over a query and its documents' texts and
gets back which documents to keep, in which order, with a score to sort by and the grades to
put in their metadata. What "keep" means is the job's own rule (rerank: its ranking cut at
``top_k``; tier: the context :func:`~evidex.jobs.select.select_context` chooses), so it lives
beside the job and the adapters read it from the registry: they never name a job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["Documents", "Keep", "Kept"]

R = TypeVar("R")


@dataclass(frozen=True)
class Keep:
    """What an adapter asks to keep: at most ``top_k`` documents (None: all), and for a job
    that chooses a context, the selection ``policy`` and its ``token_budget``."""

    top_k: int | None = None
    policy: str = "standard"
    token_budget: int = 4000


@dataclass(frozen=True)
class Kept:
    """One kept passage (by its evidex id), its score (None when the judge gave none) and the
    grades an adapter writes under the document's metadata."""

    passage_id: str
    score: float | None
    grades: dict[str, Any]


def _no_keywords(keep: Keep) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Documents(Generic[R]):
    """``kept(result, keep)``: the passages to keep, best first. ``keywords(keep)``: options
    the job's call takes from the request (rerank: its ``top_k``); the caller's own options
    win over them."""

    kept: Callable[[R, Keep], list[Kept]]
    keywords: Callable[[Keep], dict[str, Any]] = _no_keywords
