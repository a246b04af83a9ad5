"""A scripted OpenAI-compatible judge server on loopback, for the API-path benchmark.

    python bench/_loopback_judge.py [--latency-ms 300] [--port 0] [--obey]

Every ``POST /v1/chat/completions`` is answered after a fixed latency with a valid tier reply
for the passages the request carries: the passages are read from the JSON data block of the
prompt (``tasks/tier.py`` renders them with ``passages_json``), the tier names from the
request's ``response_format`` schema (else from the prompt's reply template), and each passage
gets one tier and a snippet copied verbatim from its text, so the harness validates every reply
and nothing falls back. A request whose passages cannot be found is answered with an empty
object (the harness then re-asks and, in the end, falls back: the benchmark reports it).

With ``--grades QRELS --queries TSV`` it plays a *recorded* judge instead: each passage gets
the tier of the grade recorded in the qrels file for the request's query (read from the
prompt's ``Query:`` block and looked up in the queries file) and passage id (grade 3 the first
tier of the request's scheme, 0 the last), so a benchmark can measure a pipeline against a
strong judge's past answers without calling it. A pair with no recorded grade is left out of
the reply (the harness re-asks, then falls back, and the benchmark sees it) and counted as
unreadable.

Rerank, classify and audit requests (told apart by their reply schema) get the plain replies
of ``bench/_loopback_jobs.py``. With ``--obey`` it plays a maximally gullible judge instead:
every attack phrasing of the project's suite that it is shown is carried out (the rules are
in ``bench/_obedience.py``), so bench/injection.py measures the harness's defences alone
against a judge that resists nothing. A bench tool, never a default.

A sufficiency request (its reply schema has ``sufficient``) is answered with a valid
sufficiency reply: the passages suffice when a hash of the question says so, the first passage
supporting them with a verbatim quote, else they lack "the fact asked for". A question that
ends with ``[invalid N]`` is answered invalidly N times first (counted per question: not JSON,
then a quote that is not verbatim, then a confidence above 1), so a benchmark scripts the
re-ask, the temperature-0 retry and the fallback by the questions it sends.

``GET /stats`` returns the request count, the peak of chat requests in flight at once and the
requests it could not read; ``POST /stats/reset`` zeroes them. The server runs in its own
process (uvicorn + starlette, one event loop), so it sustains hundreds of concurrent
connections and its CPU time is not counted as the client's. It prints ``port N`` on its first
line of stdout once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loopback_jobs import (
    Shown,
    audit_reply,
    classify_reply,
    json_array,
    obey_sufficiency,
    obey_tier,
    quotable,
    rerank_reply,
)

DEFAULT_TIERS = ["directly-supporting", "contextually-relevant", "irrelevant"]
_TIER_NAMES = re.compile(r'"tier": "([^"]+)"')


def passages_of(messages: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The passages of a request: the first JSON array of ``{passage_id, text}`` objects in
    the first user message (re-asks append messages after it and never repeat the block)."""
    return json_array(messages, {"passage_id", "text"})


def tier_names(body: dict[str, Any]) -> list[str]:
    """Tier names from the reply schema the request sent, else from the prompt's template."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    try:
        names = schema["properties"]["classifications"]["items"]["properties"]["tier"]["enum"]
    except (KeyError, TypeError):
        names = None
    if names:
        return [str(n) for n in names]
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    found = _TIER_NAMES.search(text)
    return [n.strip() for n in found.group(1).split("|")] if found else DEFAULT_TIERS


def snippet(text: str, limit: int = 60) -> str:
    """A verbatim span of ``text`` as shown: its first sentence (between cut marks), cut at
    a word boundary."""
    return quotable(text, limit)


def tier_reply(body: dict[str, Any]) -> dict[str, Any] | None:
    """A reply that passes the tier step's validation, or None if the request has no passages.

    The tier of a passage is picked from a hash of its id, so a run sees every tier and the
    same passage always gets the same one."""
    passages = passages_of(body.get("messages", []))
    if not passages:
        return None
    names = tier_names(body)
    items = []
    for p in passages:
        pick = int(hashlib.sha256(p["passage_id"].encode()).hexdigest()[:8], 16) % len(names)
        quote = snippet(p["text"])
        items.append(
            {
                "passage_id": p["passage_id"],
                "tier": names[pick],
                "justification": f"It says {quote}.",
                "key_evidence_snippet": quote,
            }
        )
    return {"classifications": items}


_QUERY = re.compile(r"Query:\n(.*?)\n\nPassages to grade", re.DOTALL)

Recorded = dict[tuple[str, str], int]
"""``(query text, passage id) -> grade``."""


def read_recorded(qrels: str, queries: str) -> Recorded:
    """Grades of a qrels file (``qid 0 pid grade``) keyed by query text and passage id."""
    texts = {}
    with open(queries, encoding="utf-8") as lines:
        for line in lines:
            qid, _, text = line.rstrip("\n").partition("\t")
            texts[qid] = " ".join(text.split())
    grades: Recorded = {}
    with open(qrels, encoding="utf-8") as lines:
        for line in lines:
            parts = line.split()
            if len(parts) == 4 and parts[0] in texts:
                grades[(texts[parts[0]], parts[2])] = int(parts[3])
    return grades


def recorded_reply(body: dict[str, Any], grades: Recorded) -> dict[str, Any] | None:
    """The recorded grade of every passage of the request as a valid tier reply."""
    messages = body.get("messages", [])
    passages = passages_of(messages)
    user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    found = _QUERY.search(user)
    if not passages or found is None:
        return None
    query = " ".join(found.group(1).split())
    names = tier_names(body)
    items = []
    for p in passages:
        grade = grades.get((query, p["passage_id"]))
        if grade is None:
            return None
        quote = snippet(p["text"])
        items.append(
            {
                "passage_id": p["passage_id"],
                "tier": names[max(0, len(names) - 1 - grade)],
                "justification": f"Recorded grade {grade}; it says {quote}.",
                "key_evidence_snippet": quote,
            }
        )
    return {"classifications": items}


_QUESTION = re.compile(r"## QUESTION\n(.*?)\n\n## RETRIEVED PASSAGES", re.DOTALL)
_INVALID = re.compile(r"\[invalid (\d+)\]\s*$")
_INVALID_REPLIES = (
    "The passages seem to cover it.",  # not JSON
    {"quote": "a span the passage does not hold"},  # replaced by a non-verbatim quote
    {"confidence": 1.5},  # out of range
)


def is_sufficiency(body: dict[str, Any]) -> bool:
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    if "sufficient" in (schema.get("properties") or {}):
        return True
    return any(_QUESTION.search(str(m.get("content") or "")) for m in body.get("messages", []))


def sufficiency_reply(body: dict[str, Any], seen: dict[str, int]) -> dict[str, Any] | str | None:
    """A valid sufficiency reply, or the scripted invalid one (see the module docstring);
    ``seen`` counts the requests per question. None: no question or passages found."""
    messages = body.get("messages", [])
    user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    found = _QUESTION.search(user)
    passages = passages_of(messages)
    if found is None or not passages:
        return None
    question = " ".join(found.group(1).split())
    seen[question] = seen.get(question, 0) + 1
    first = passages[0]
    quote = snippet(first["text"])
    valid: dict[str, Any] = {
        "sufficient": True,
        "confidence": 0.9,
        "supporting_passage_ids": [first["passage_id"]],
        "key_quotes": [{"passage_id": first["passage_id"], "quoted_text": quote}],
        "missing": [],
    }
    if int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) % 2:
        valid.update(
            sufficient=False, supporting_passage_ids=[], key_quotes=[],
            missing=["the fact asked for"],
        )  # fmt: skip
    wanted = _INVALID.search(question)
    if wanted is None or seen[question] > int(wanted.group(1)):
        return valid
    bad = _INVALID_REPLIES[(seen[question] - 1) % len(_INVALID_REPLIES)]
    if isinstance(bad, str):
        return bad
    if "quote" in bad:
        return {
            **valid,
            "sufficient": True,
            "supporting_passage_ids": [first["passage_id"]],
            "key_quotes": [{"passage_id": first["passage_id"], "quoted_text": bad["quote"]}],
            "missing": [],
        }
    return {**valid, **bad}


class Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.unreadable = 0
        self.temperature_zero = 0
        self.seen: dict[str, int] = {}

    def as_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "unreadable": self.unreadable,
            "temperature_zero": self.temperature_zero,
        }


def reply_to(
    body: dict[str, Any],
    grades: Recorded | None = None,
    seen: dict[str, int] | None = None,
    obey: bool = False,
) -> dict[str, Any] | str | None:
    """The reply to one chat request, by the job its reply schema names (None: the request
    could not be read). ``obey``: carry out the orders its text gives (``_obedience``)."""
    shown = Shown(body, passages_of(body.get("messages", [])), obey)
    props = shown.schema.get("properties") or {}
    if is_sufficiency(body):
        reply = sufficiency_reply(body, {} if seen is None else seen)
        return obey_sufficiency(shown, reply) if isinstance(reply, dict) else reply
    if not shown.passages:
        return None
    if "ranked_passages" in props:
        return rerank_reply(shown)
    if "claims" in props:
        return audit_reply(shown)
    items = (props.get("classifications") or {}).get("items") or {}
    if "label" in (items.get("properties") or {}):
        return classify_reply(shown)
    reply = tier_reply(body) if grades is None else recorded_reply(body, grades)
    return None if reply is None else obey_tier(shown, reply, tier_names(body))


def build_app(latency_s: float, grades: Recorded | None = None, obey: bool = False) -> Starlette:
    stats = Stats()

    async def chat(request: Request) -> JSONResponse:
        stats.requests += 1
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            # the latency runs from the request's arrival, and the reply is made while it runs:
            # a burst of requests is answered together, not one reply's work after another
            arrived = time.perf_counter()
            body = await request.json()
            stats.temperature_zero += body.get("temperature") == 0
            reply = reply_to(body, grades, stats.seen, obey)
            if reply is None:
                stats.unreadable += 1
                reply = {}
            response = JSONResponse(completion(str(body.get("model", "bench-model")), reply))
            await asyncio.sleep(max(0.0, latency_s - (time.perf_counter() - arrived)))
            return response
        finally:
            stats.in_flight -= 1

    async def models(_: Request) -> JSONResponse:
        model = {"id": "bench-model", "object": "model", "owned_by": "bench"}
        return JSONResponse({"object": "list", "data": [model]})

    async def get_stats(_: Request) -> JSONResponse:
        return JSONResponse(stats.as_dict())

    async def reset_stats(_: Request) -> JSONResponse:
        stats.reset()
        return JSONResponse(stats.as_dict())

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/stats", get_stats, methods=["GET"]),
            Route("/stats/reset", reset_stats, methods=["POST"]),
        ]
    )


def completion(model: str, reply: dict[str, Any] | str) -> dict[str, Any]:
    text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": 0,
            "completion_tokens": len(text) // 4,
            "total_tokens": len(text) // 4,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--grades", help="a qrels file of recorded grades to answer with")
    parser.add_argument("--queries", help="the queries (qid<TAB>text) of --grades")
    parser.add_argument(
        "--obey",
        action="store_true",
        help="play a judge that obeys every attack phrasing it is shown (bench/_obedience.py)",
    )
    args = parser.parse_args(argv)
    grades = read_recorded(args.grades, args.queries) if args.grades else None

    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it every answer on a kept-alive connection waited 40 ms for a delayed ACK
    # (uvicorn writes the headers and the body apart, and Nagle holds the second)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    print(f"port {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        build_app(args.latency_ms / 1000, grades, args.obey),
        log_level="warning",
        access_log=False,
        backlog=2048,
        timeout_keep_alive=30,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
