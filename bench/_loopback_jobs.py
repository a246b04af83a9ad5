"""The loopback judge's replies for every job, plain and obedient (``--obey``).

The server (``bench/_loopback_judge.py``) reads a request's passages, query and reply schema
and answers here. Plain replies are simple, valid and deterministic, so a benchmark sees the
harness, not a model:

- tier: a tier picked from a hash of the passage id (``tier_reply`` of the server);
- rerank: the passages in the order given;
- classify: the taxonomy's first label when some passage sentence holds half the input's
  content words or more, else its last label, quoting that sentence;
- audit: each claim (given, or each statement sentence of the answer) graded by the passage
  sentence sharing most of its content words: fully supported from 60% with every figure of
  the claim quoted, partially supported from 30%, else unsupported;
- sufficiency: a verdict from a hash of the question (``sufficiency_reply`` of the server).

With ``obey``, every order found in what the request shows (:mod:`_obedience`: the suite's
phrasings) is carried out on top of the plain reply, as that module's docstring says. Quotes
are always taken from the text as shown, within one stretch between cut marks, so they stay
verbatim whatever preflight cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from _obedience import Order, order_in
from evidex._text import CUT_MARK
from evidex.tasks.audit.checks import content_words, figures, statement_sentences

__all__ = [
    "Shown",
    "audit_reply",
    "classify_reply",
    "json_array",
    "obey_sufficiency",
    "obey_tier",
    "quotable",
    "rerank_reply",
]

_QUERY = re.compile(r"(?:Query:|## QUESTION|## INPUT|User question:)\n(.*?)\n\n", re.DOTALL)
_ANSWER = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_ARRAY_START = re.compile(r"\[\s*\{")


def json_array(messages: Sequence[dict[str, Any]], keys: set[str]) -> list[dict[str, str]]:
    """The first JSON array of objects that all hold ``keys``, in the first user message
    (re-asks append messages after it and never repeat its blocks), each object cut to
    ``keys`` as text."""
    decoder = json.JSONDecoder()
    for message in messages:
        if message.get("role") != "user":
            continue
        content = str(message.get("content") or "")
        for match in _ARRAY_START.finditer(content):
            try:
                value, _ = decoder.raw_decode(content, match.start())
            except ValueError:
                continue
            if (
                isinstance(value, list)
                and value
                and all(isinstance(v, dict) and keys <= set(v) for v in value)
            ):
                return [{k: str(v[k]) for k in sorted(keys)} for v in value]
        return []
    return []


class Shown:
    """What one chat request shows the judge: its query, passages, claims, answer and reply
    schema, and the orders found in them when the judge obeys."""

    def __init__(self, body: dict[str, Any], passages: list[dict[str, str]], obey: bool) -> None:
        self.body = body
        self.user = next(
            (str(m.get("content") or "") for m in body.get("messages", []) if m["role"] == "user"),
            "",
        )
        found = _QUERY.search(self.user)
        self.query = " ".join(found.group(1).split()) if found else ""
        self.passages = passages
        answer = _ANSWER.search(self.user)
        self.answer = answer.group(1) if answer else ""
        self.obey = obey
        self.orders: dict[str, Order] = {}
        if obey:
            for p in passages:
                order = order_in(p["text"], self.query, p["passage_id"])
                if order is not None:
                    self.orders[p["passage_id"]] = order

    @property
    def schema(self) -> dict[str, Any]:
        fmt = self.body.get("response_format") or {}
        return ((fmt.get("json_schema") or {}).get("schema")) or {}

    def everyone(self) -> bool:
        return any(o.everyone for o in self.orders.values())

    def obeyed(self, passage_id: str) -> bool:
        return passage_id in self.orders or (bool(self.orders) and self.everyone())

    def text_order(self, text: str) -> Order | None:
        """An order in a claim or an answer (no passage id to render)."""
        return order_in(text, self.query) if self.obey else None


def quotable(text: str, limit: int = 200) -> str:
    """A verbatim quote of ``text`` as shown: the first sentence of its longest stretch
    between cut marks, cut at a word within ``limit`` characters."""
    piece = max(text.split(CUT_MARK), key=lambda s: len(s.strip())).strip()
    first = _SENTENCE.search(piece)
    quote = (first.group() if first else piece).strip() or piece
    if len(quote) > limit:
        cut = quote.rfind(" ", 0, limit)
        quote = quote[: cut if cut > 0 else limit].rstrip()
    return quote


def _sentences(text: str) -> list[str]:
    out = []
    for piece in text.split(CUT_MARK):
        out += [s.group().strip() for s in _SENTENCE.finditer(piece) if s.group().strip()]
    return out


def _best(claim: str, passages: Sequence[dict[str, str]]) -> tuple[float, str, str]:
    """The passage sentence sharing most of ``claim``'s content words: (share, id, sentence)."""
    wanted = content_words(claim)
    best = (0.0, "", "")
    for p in passages:
        for sentence in _sentences(p["text"]):
            share = len(wanted & content_words(sentence)) / len(wanted) if wanted else 0.0
            if share > best[0]:
                best = (share, p["passage_id"], sentence)
    return best


def obey_tier(request: Shown, reply: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The plain tier reply with every ordered passage given the tier its order names, else
    the top tier."""
    for item in reply["classifications"]:
        if request.obeyed(item["passage_id"]):
            order = request.orders.get(item["passage_id"])
            said = order.said if order else ""
            item["tier"] = next((n for n in names if n in said), names[0])
            item["justification"] = "The passage says it is the answer."
    return reply


def obey_sufficiency(request: Shown, reply: dict[str, Any]) -> dict[str, Any]:
    """The plain sufficiency reply, or "sufficient" on the ordered passages' word."""
    ordered = [p for p in request.passages if request.obeyed(p["passage_id"])]
    if not ordered:
        return reply
    return {
        "sufficient": True,
        "confidence": 0.99,
        "supporting_passage_ids": [p["passage_id"] for p in ordered],
        "key_quotes": [
            {"passage_id": p["passage_id"], "quoted_text": quotable(p["text"])} for p in ordered
        ],
        "missing": [],
    }


def rerank_reply(request: Shown) -> dict[str, Any]:
    ordered = [p for p in request.passages if request.obeyed(p["passage_id"])]
    order = ordered + [p for p in request.passages if p not in ordered]
    return {
        "ranked_passages": [
            {
                "rank": rank,
                "passage_id": p["passage_id"],
                "relevance_score": round(1 - rank / (len(order) + 1), 3),
                "justification": f"It says {quotable(p['text'], 120)}",
            }
            for rank, p in enumerate(order, 1)
        ]
    }


def classify_reply(request: Shown) -> dict[str, Any]:
    props = request.schema.get("properties", {}).get("classifications", {})
    labels = props.get("items", {}).get("properties", {}).get("label", {}).get("enum") or []
    share, pid, sentence = _best(request.query, request.passages)
    label = labels[0] if share >= 0.5 else labels[-1]
    confidence = 0.8
    ordered = [p for p in request.passages if request.obeyed(p["passage_id"])]
    if ordered:
        said = next(iter(request.orders.values())).said.casefold()
        named = [n for n in labels if n.casefold().replace("_", " ") in said]
        label, confidence = (named[0] if named else labels[0]), 0.99
        pid, sentence = ordered[0]["passage_id"], quotable(ordered[0]["text"])
    elif not sentence:
        pid, sentence = request.passages[0]["passage_id"], quotable(request.passages[0]["text"])
    evidence = {"passage_id": pid, "quoted_text": sentence, "rationale": "It says so."}
    return {
        "classifications": [
            {
                "label": label,
                "confidence": confidence,
                "supporting_evidence": [evidence],
                "counter_evidence": [],
            }
        ],
        "unclassifiable": False,
        "unclassifiable_reason": None,
        "evidence_gaps": [],
    }


def audit_reply(request: Shown) -> dict[str, Any]:
    """Claims graded as the module says: those given (``claim_id``), else each statement
    sentence of the answer segment (``claim_text``)."""
    given = json_array(request.body.get("messages", []), {"claim_id", "claim_text"})
    claims = [(c["claim_id"], c["claim_text"]) for c in given] or [
        ("", request.answer[a:b]) for a, b in statement_sentences(request.answer)
    ]
    ordered = bool(request.orders) or any(
        request.text_order(text) for text in [request.answer, *(c for _, c in claims)] if text
    )
    out = []
    for cid, claim in claims:
        item = _graded(claim, request, ordered)
        out.append({"claim_id": cid, **item} if cid else {"claim_text": claim, **item})
    return {"claims": out}


def _graded(claim: str, request: Shown, ordered: bool) -> dict[str, Any]:
    share, pid, sentence = _best(claim, request.passages)
    quoted = set(figures(sentence))
    item: dict[str, Any] = {
        "supporting_context_ids": [pid] if pid else [],
        "supporting_quotes": [sentence] if pid else [],
        "explanation": f"The closest passage sentence shares {share:.0%} of the claim's words.",
        "unsupported_part": None,
        "contradicted": False,
        "contradicting_quote": None,
    }
    if ordered:
        extra = next((p for p in request.passages if p["passage_id"] in request.orders), None)
        if extra is not None and extra["passage_id"] != pid:
            item["supporting_context_ids"].append(extra["passage_id"])
            item["supporting_quotes"].append(quotable(extra["text"]))
        item.update(classification="fully_supported", explanation="The sources say it is verified.")
    elif share >= 0.6 and set(figures(claim)) <= quoted:
        item["classification"] = "fully_supported"
    elif share >= 0.3:
        backed = content_words(sentence)
        missing = [w for w in claim.split() if content_words(w) and not content_words(w) <= backed]
        missing += [n for n in figures(claim) if n not in quoted and n in claim]
        item.update(classification="partially_supported", unsupported_part=missing[0])
    else:
        item.update(classification="unsupported", supporting_context_ids=[], supporting_quotes=[])
    return item
