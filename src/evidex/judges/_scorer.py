"""What every score-mode scorer of ``local:qwen`` is (:class:`ModelScorer`) and how its
replies are fingerprinted (:func:`scoring_version`).

A scorer answers a job's request with code around one narrow model question at a time: the
model reads picked sentences and gives a Yes/No or a grade, and code writes the reply JSON, so
nothing a passage says can shape the reply's structure. The jobs' scorers (audit, classify
and the others) differ in the question and the cut points, not in this.
"""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar

from evidex._text import sha256_hex
from evidex.judges._claim_evidence import Embed

__all__ = ["ModelScorer", "scoring_version"]


def scoring_version(*parts: object) -> str:
    """The fingerprint of what a scorer's replies depend on (its prompts, cut points and
    evidence picking): a judge in scoring mode puts it in its own, so the cache never serves a
    reply made otherwise."""
    return sha256_hex(json.dumps(list(parts)))[:12]


Ask = TypeVar("Ask")
CutsT = TypeVar("CutsT")
PayloadT = TypeVar("PayloadT")


class ModelScorer(Generic[Ask, CutsT, PayloadT]):
    """A score-mode scorer: code that picks the sentences a small model reads (with ``embed``)
    and asks it one narrow question at a time (``ask``: Yes/No, or a grade), then writes the
    reply JSON from the readings and its cut points. The model never writes the reply, so
    nothing a passage says can shape the reply's structure. ``name`` is who answers the
    questions, for the rationales (``local:qwen``)."""

    def __init__(self, ask: Ask, embed: Embed, *, cuts: CutsT | None = None, name: str) -> None:
        self.ask = ask
        self._embed = embed
        self.cuts = cuts if cuts is not None else self.default_cuts()
        self.name = name

    def default_cuts(self) -> CutsT:
        raise NotImplementedError

    def reply(self, payload: PayloadT) -> dict[str, Any]:
        raise NotImplementedError

    def reply_text(self, payload: PayloadT) -> str:
        """:meth:`reply` as the JSON text a judge answers with."""
        return json.dumps(self.reply(payload), ensure_ascii=False)
