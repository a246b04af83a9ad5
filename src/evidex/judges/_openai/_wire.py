"""What goes over the wire: the request body, the structured-output modes, the reply, and the
helpers that keep credentials out of every text (URLs, server error messages, exceptions).

The body is serialised once per call, straight from our plain messages, and the reply is read
from its JSON with only the fields a judge reply needs: no request or response models are
built (:mod:`._http` says why the SDK is not used). A streamed reply is put together from its
chunks (:func:`parse_stream`) into the same :class:`ParsedReply`.
"""

from __future__ import annotations

import datetime
import email.utils
import functools
import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr

from evidex._text import read_json, wire_json
from evidex.config import load_settings
from evidex.errors import ConfigError
from evidex.judges._openai._http import Answer, Interrupted, StatusError, Unreachable
from evidex.judging import JudgeRequest

__all__ = [
    "FORMAT_WORDS",
    "OPENAI_URL",
    "PLACEHOLDER_KEY",
    "Kind",
    "ParsedReply",
    "body_of",
    "choose_kind",
    "ladder_of",
    "on_this_machine",
    "parse_answer",
    "parse_completion",
    "parse_stream",
    "public_url",
    "redact",
    "resolve_api_key",
    "resolve_base_urls",
    "response_format",
    "retry_after_seconds",
    "scrub_exception",
    "server_message",
    "url_secrets",
]

OPENAI_URL = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "not-needed"
"""Sent to servers that need no key (Ollama, llama.cpp, LM Studio, a bare vLLM): these servers
ignore it, and a proxy in front of one may insist on some Authorization header."""

FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|structured output", re.I)

Kind = Literal["json_schema", "json_object_schema", "json_object", "none"]
"""A structured-output mode as sent: JSON schema; ``json_object`` carrying the schema (the
llama.cpp servers read it); bare ``json_object``; the prompt alone."""

_LADDERS: dict[str, tuple[Kind, ...]] = {
    "auto": ("json_schema", "json_object_schema", "json_object", "none"),
    "json_schema": ("json_schema",),
    "json_object": ("json_object_schema", "json_object"),
    "none": ("none",),
}
_SCHEMA_KINDS = frozenset({"json_schema", "json_object_schema"})


def ladder_of(option: str) -> tuple[Kind, ...]:
    """The modes the ``structured_output`` option allows, most constrained first."""
    return _LADDERS[option]


def choose_kind(ladder: Sequence[Kind], refused: frozenset[str], has_schema: bool) -> Kind | None:
    """The first mode of ``ladder`` the endpoint has not refused; a request without a schema
    sends bare ``json_object`` for the schema modes. None: every allowed mode was refused."""
    for kind in ladder:
        sent: Kind = "json_object" if kind in _SCHEMA_KINDS and not has_schema else kind
        if sent not in refused:
            return sent
    return None


def response_format(kind: Kind, request: JudgeRequest) -> dict[str, Any] | None:
    if kind == "none":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_object_schema":
        return {"type": "json_object", "schema": dict(request.schema)}
    name = _schema_name(request.step or request.job)
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": dict(request.schema), "strict": False},
    }


@functools.lru_cache(maxsize=256)
def _schema_name(step: str) -> str:
    """The schema's name as the API allows it; a handful of steps, so computed once each."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", step)[:50] + "_reply"


def body_of(model: str, request: JudgeRequest, kind: Kind, *, stream: bool = False) -> bytes:
    """The chat-completions body as JSON bytes, serialised once. ``stream``: ask for the reply
    as server-sent events, the usage in its last chunk (``stream_options``, which servers that
    do not know it ignore)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    fmt = response_format(kind, request)
    if fmt is not None:
        body["response_format"] = fmt
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return wire_json(body)


class ParsedReply:
    """The parts of a chat completion that a judge reply needs."""

    __slots__ = (
        "completion_tokens",
        "finish_reason",
        "model",
        "prompt_tokens",
        "text",
        "usage_reported",
    )

    def __init__(self, data: Any) -> None:
        """Raise ``ValueError`` when ``data`` is not a chat completion."""
        try:
            choice = data["choices"][0]
            message = choice["message"]
            self.text = str(message.get("content") or message.get("refusal") or "")
            self.finish_reason = choice.get("finish_reason")
            usage = data.get("usage") or {}
            self.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            self.completion_tokens = int(usage.get("completion_tokens") or 0)
            model = data.get("model")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ValueError("not a chat completion") from exc
        self.model = str(model) if model else ""
        self.usage_reported = bool(usage)


def parse_completion(content: bytes) -> ParsedReply:
    """Read a chat completion from the response body; ``ValueError`` if it is not one."""
    return ParsedReply(read_json(content))


def parse_answer(answer: Answer) -> ParsedReply:
    """The reply of an answer, streamed or not (see :func:`parse_stream`)."""
    if answer.events is None:
        return parse_completion(answer.body)
    return parse_stream(answer.events, done=answer.done)


def parse_stream(events: Sequence[bytes], *, done: bool) -> ParsedReply:
    """A streamed chat completion put together: the content (or refusal) deltas of the first
    choice joined, its last ``finish_reason``, the model, and the usage of the chunk that
    carries it; a server that sends none (llama-cpp-python) has its completion tokens counted
    as the chunks that carried text, one token each on the llama.cpp servers, and
    :attr:`ParsedReply.usage_reported` False.

    ``ValueError``: the events are not chat-completion chunks. :class:`StatusError`: the server
    sent an error event (its ``error.code`` as the status when it is one, else 500).
    :class:`Interrupted`: the stream ended with no ``finish_reason``; :class:`Unreachable` when
    it did not even end with ``[DONE]``."""
    chunks = read_json(b"[" + b",".join(events) + b"]")
    if not isinstance(chunks, list):
        raise ValueError("not a stream of chat-completion chunks")
    parts: list[str] = []
    finish: str | None = None
    usage: Mapping[str, Any] = {}
    model = ""
    counted = 0
    try:
        for chunk in chunks:
            if "error" in chunk:
                error = chunk["error"]
                code = error.get("code") if isinstance(error, Mapping) else None
                status = code if isinstance(code, int) and 400 <= code < 600 else 500
                raise StatusError(status, wire_json(chunk).decode("utf-8"), None)
            model = str(chunk.get("model") or model)
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                text = delta.get("content") or delta.get("refusal")
                if text:
                    parts.append(str(text))
                    counted += 1
                finish = choice.get("finish_reason") or finish
    except (TypeError, AttributeError) as exc:
        raise ValueError("not a stream of chat-completion chunks") from exc
    if finish is None:
        if done:
            raise Interrupted("the server ended the stream before the reply was finished")
        raise Unreachable("the connection closed before the reply was finished")
    parsed = ParsedReply(
        {
            "model": model,
            "choices": [{"message": {"content": "".join(parts)}, "finish_reason": finish}],
            "usage": usage or {"completion_tokens": counted},
        }
    )
    parsed.usage_reported = bool(usage)
    return parsed


# ---------------------------------------------------------------------- credentials


def public_url(url: str) -> str:
    """``url`` without user info and query string, where credentials may hide."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def url_secrets(url: str) -> list[str]:
    """The password and query string of ``url``, to scrub from texts."""
    try:
        parts = urlsplit(url)
        found = [parts.password or "", parts.query]
    except ValueError:
        return []
    return [s for s in found if len(s) >= 4]


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def server_message(status: int, text: str) -> str:
    """What a server said in its error body: the OpenAI form ``{"error": {"message"}}``, the
    FastAPI form ``{"detail"}``, a bare string, else the text itself."""
    try:
        body = read_json(text)
    except ValueError:
        return text.strip() or f"HTTP {status}"
    data = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(data, Mapping):
        message = data.get("message") or data.get("error") or data.get("detail")
        if message:
            return str(message)
    elif isinstance(data, str) and data:
        return data
    return f"HTTP {status} - {body}"


def scrub_exception(exc: BaseException, secrets: Sequence[str]) -> None:
    """Remove secrets a server echoed into an exception, which stays chained to ours."""
    if secrets:
        exc.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in exc.args)
        if isinstance(getattr(exc, "text", None), str):
            exc.text = redact(exc.text, secrets)  # type: ignore[attr-defined]


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: either a number of seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())


# ---------------------------------------------------------------------- configuration


def resolve_base_urls(one: str | None, several: list[str] | None) -> tuple[str, ...]:
    if one and several:
        raise ConfigError("give base_url (one server) or base_urls (several), not both")
    if several:
        urls = list(several)
    elif one:
        urls = [one]
    else:
        configured = load_settings().openai.urls()
        urls = list(configured) if configured else [OPENAI_URL]
    checked = [checked_url(u) for u in urls if u.strip()]
    if not checked:
        raise ConfigError("base_urls is empty: name at least one server")
    if len(set(checked)) != len(checked):
        raise ConfigError(f"base_urls names a server twice: {[public_url(u) for u in checked]}")
    return tuple(checked)


def on_this_machine(url: str) -> bool:
    """Whether ``url`` names a server on this machine (``localhost`` or a loopback address)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def checked_url(url: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"base_url {public_url(url)!r} is not an http(s) URL; "
            "e.g. http://localhost:11434/v1 for Ollama"
        )
    return url.rstrip("/")


def resolve_api_key(option: SecretStr | None, base_urls: tuple[str, ...]) -> str:
    key = option.get_secret_value() if option is not None else os.environ.get("OPENAI_API_KEY")
    if key and key.strip():
        return key.strip()
    openai_host = urlsplit(OPENAI_URL).hostname
    if any(urlsplit(u).hostname == openai_host for u in base_urls):
        raise ConfigError(
            "the openai judge needs an API key for api.openai.com: set OPENAI_API_KEY or pass "
            "api_key; for a local server set base_url (or EVIDEX_OPENAI_BASE_URL)"
        )
    return PLACEHOLDER_KEY
