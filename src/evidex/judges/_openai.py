"""``openai:MODEL``: a judge behind any OpenAI-compatible chat API.

One backend serves OpenAI, Azure's v1 endpoint, vLLM, Ollama, the llama.cpp server and
LM Studio: they differ by configuration (``base_url``, ``api_key``), not by code.

Structured output: by default (``structured_output="auto"``) each request carries the task's
JSON schema as ``response_format`` so servers that support it constrain decoding. A server that
answers 400 about ``response_format`` is remembered (for this judge instance) and the same call
is sent again prompt-only; the harness's JSON extraction and validation then do the work.

Errors are converted in one place (:meth:`OpenAIJudge._convert`): transport faults, timeouts,
429 and 5xx become :class:`JudgeUnavailable` (retried by the harness, counted by the breaker);
a refused key, an unknown model or a request the server will never accept becomes
:class:`ConfigError`, which stops the run instead of burning retries. The API key never appears
in ``judge_id``, :meth:`fingerprint`, ``repr``, error messages or logs: server error texts are
scrubbed of it before they are shown anywhere, including the chained SDK exception.
"""

from __future__ import annotations

import datetime
import email.utils
import logging
import os
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

import openai
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evidex.errors import ConfigError, EvidexError, JudgeError, JudgeUnavailable
from evidex.judges._options import parse_options
from evidex.judging import Judge, JudgeReply, JudgeRequest
from evidex.types import Usage

__all__ = ["OpenAIJudge"]

logger = logging.getLogger("evidex.judges.openai")

OPENAI_URL = "https://api.openai.com/v1"
PLACEHOLDER_KEY = "not-needed"
"""Sent to servers that need no key (Ollama, llama.cpp, LM Studio, a bare vLLM): the SDK
requires one, and these servers ignore it."""

_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|structured output", re.I)
_RETRYABLE = frozenset({408, 409, 429})

StructuredOutput = Literal["auto", "json_schema", "json_object", "none"]


class OpenAIJudge(Judge):
    """A chat-completions judge for every job. Build it with ``get_judge("openai:MODEL")``.

    ``base_url`` comes from the option, else ``EVIDEX_OPENAI_BASE_URL``, else
    ``OPENAI_BASE_URL``, else OpenAI itself; ``api_key`` from the option, else
    ``OPENAI_API_KEY``. OpenAI without a key is a :class:`ConfigError`; any other server without
    a key gets the placeholder key ``"not-needed"``, since local servers ignore it.

    No idle connection is kept between calls: the sync API runs each job in its own event
    loop, and a pooled connection of a finished loop cannot be reused (a judge call lasts
    seconds, so one connection setup per call costs little).
    """

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank", "classify", "audit"})

    class Options(BaseModel):
        """Options of ``openai:MODEL``; a misspelled one is a :class:`ConfigError`."""

        model_config = ConfigDict(extra="forbid", frozen=True)

        base_url: str | None = Field(
            default=None, description="the server's API root, e.g. http://localhost:11434/v1"
        )
        api_key: SecretStr | None = Field(default=None, description="default: OPENAI_API_KEY")
        timeout_s: float = Field(default=60.0, gt=0, description="per HTTP request")
        max_retries: int = Field(
            default=0, ge=0, description="SDK-level retries; 0 because the harness retries"
        )
        structured_output: StructuredOutput = Field(
            default="auto",
            description="auto: JSON schema, prompt-only if the server rejects it; json_schema "
            "and json_object: insist (a rejection is a ConfigError); none: prompt-only",
        )
        context_window: int = Field(
            default=8192, ge=1024, description="tokens the model accepts; sizes truncation"
        )
        headers: dict[str, str] = Field(
            default_factory=dict, repr=False, description="extra HTTP headers (may hold secrets)"
        )

    def __init__(self, model: str, options: OpenAIJudge.Options | None = None) -> None:
        if not model.strip():
            raise ConfigError("the openai judge needs a model: openai:MODEL")
        super().__init__(f"openai:{model}")
        self.model = model
        self.options = options or self.Options()
        self.base_url = _resolve_base_url(self.options.base_url)
        self.context_window = self.options.context_window
        self._api_key = SecretStr(_resolve_api_key(self.options.api_key, self.base_url))
        self._format: StructuredOutput = self.options.structured_output
        self._reported_model: str | None = None
        self._client: openai.AsyncOpenAI | None = None

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> OpenAIJudge:
        """Build from ``openai:MODEL`` and options (see :class:`OpenAIJudge.Options`)."""
        prefix, _, model = spec.partition(":")
        if prefix != "openai" or not model.strip():
            raise ConfigError(
                f"judge spec {spec!r} names no model: write openai:MODEL, e.g. "
                "openai:gpt-4o-mini, or openai:llama3.1 with base_url set to a local server"
            )
        return cls(model.strip(), parse_options(cls.Options, options, spec))

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> Mapping[str, Any]:
        """What changes judgments: the model, the server (without credentials) and how
        output is constrained. Never the key."""
        return {
            "model": self.model,
            "base_url": _public_url(self.base_url),
            "structured_output": self.options.structured_output,
        }

    @property
    def model_version(self) -> str:
        """The model name the server reported on its last answer, else the configured one."""
        return self._reported_model or self.model

    @property
    def structured_output(self) -> StructuredOutput:
        """The mode in use: ``auto`` turns into ``none`` once the server rejected schemas."""
        return self._format

    def __repr__(self) -> str:
        return f"<OpenAIJudge {self.judge_id} at {_public_url(self.base_url)}>"

    # ------------------------------------------------------------------ calls

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """Send one chat completion; vendor errors leave this method converted."""
        try:
            completion = await self._send(request)
        except (openai.OpenAIError, ValueError) as exc:  # ValueError: a body that is not JSON
            raise self._convert(exc) from exc
        return self._reply(completion)

    async def _send(self, request: JudgeRequest) -> Any:
        response_format = self._response_format(request)
        try:
            return await self._create(request, response_format)
        except openai.BadRequestError as exc:
            if not (self._format == "auto" and response_format and _mentions_format(exc)):
                raise
        logger.warning("%s rejects response_format; sending prompt-only from now on", self._where())
        self._format = "none"
        return await self._create(request, None)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def _client_for_call(self) -> openai.AsyncOpenAI:
        if self._client is None:
            default = openai.DEFAULT_CONNECTION_LIMITS  # the SDK's own HTTP library type
            limits = type(default)(
                max_connections=default.max_connections, max_keepalive_connections=0
            )
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key.get_secret_value(),
                base_url=self.base_url,
                timeout=self.options.timeout_s,
                max_retries=self.options.max_retries,
                default_headers=self.options.headers or None,
                http_client=openai.DefaultAsyncHttpxClient(limits=limits),
            )
        return self._client

    async def _create(self, request: JudgeRequest, response_format: dict[str, Any] | None) -> Any:
        logger.debug(
            "%s: %s attempt %d at temperature %g (%s)",
            self.judge_id,
            request.step or request.job,
            request.attempt,
            request.temperature,
            "schema" if response_format else "prompt-only",
        )
        extra: dict[str, Any] = {"response_format": response_format} if response_format else {}
        return await self._client_for_call().chat.completions.create(
            model=self.model,
            messages=[{"role": m.role, "content": m.content} for m in request.messages],  # type: ignore[misc]
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            **extra,
        )

    def _response_format(self, request: JudgeRequest) -> dict[str, Any] | None:
        mode = self._format
        if mode in ("auto", "json_schema") and request.schema:
            name = re.sub(r"[^A-Za-z0-9_-]", "_", request.step or request.job)[:50] + "_reply"
            return {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": dict(request.schema), "strict": False},
            }
        if mode in ("auto", "json_schema", "json_object"):
            return {"type": "json_object"}
        return None

    def _reply(self, completion: Any) -> JudgeReply:
        try:
            choice = completion.choices[0]
            message = choice.message
            text = message.content or getattr(message, "refusal", None) or ""
            usage = completion.usage
            model = completion.model
        except (AttributeError, TypeError, IndexError) as exc:  # 200 without the usual shape
            raise self._malformed() from exc
        if choice.finish_reason == "length":
            logger.info("%s: the reply hit max_tokens and is probably cut off", self.judge_id)
        self._reported_model = str(model) if model else self.model
        return JudgeReply(
            text=str(text),
            usage=Usage(
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            ),
            model_version=self._reported_model,
        )

    # ------------------------------------------------------------------ errors

    def _convert(self, exc: openai.OpenAIError | ValueError) -> EvidexError:
        """The one place where SDK exceptions become evidex errors (scrubbed of secrets)."""
        _scrub_exception(exc, self._secrets())
        where = self._where()
        if isinstance(exc, ValueError | openai.APIResponseValidationError):
            return self._malformed()
        if isinstance(exc, openai.APITimeoutError):
            return JudgeUnavailable(f"{where} did not answer within {self.options.timeout_s:g}s")
        if isinstance(exc, openai.APIConnectionError):
            cause = self._scrub(str(exc.__cause__ or exc)) or type(exc.__cause__).__name__
            return JudgeUnavailable(f"cannot reach {where}: {cause}")
        if isinstance(exc, openai.APIStatusError):
            return self._convert_status(exc, where)
        return JudgeError(f"{where}: {self._scrub(str(exc))}")

    def _convert_status(self, exc: openai.APIStatusError, where: str) -> EvidexError:
        status = exc.status_code
        detail = self._scrub(_server_message(exc))
        if status in _RETRYABLE or status >= 500:
            after = exc.response.headers.get("retry-after")
            wait = f", retry after {after}s" if after else ""
            return JudgeUnavailable(
                f"{where} answered HTTP {status}{wait}: {detail}",
                status=status,
                retry_after_s=_retry_after_seconds(after),
            )
        if status in (401, 403):
            hint = "check OPENAI_API_KEY or the api_key option"
            return ConfigError(f"{where} refused the credentials (HTTP {status}: {detail}); {hint}")
        if status == 404:
            return ConfigError(
                f"{where} has no model {self.model!r} or no chat endpoint (HTTP 404: {detail}); "
                "check the model name and that base_url is the API root (often ending in /v1)"
            )
        if self._format != "none" and _FORMAT_WORDS.search(detail):
            return ConfigError(
                f"{where} rejects response_format (HTTP {status}: {detail}); use "
                "structured_output='auto' or 'none' with this server"
            )
        return ConfigError(
            f"{where} rejected the request (HTTP {status}: {detail}); check the model's "
            "context_window and the judge options"
        )

    def _malformed(self) -> JudgeUnavailable:
        return JudgeUnavailable(f"{self._where()} answered something that is not a chat completion")

    def _where(self) -> str:
        return f"{self.judge_id} at {_public_url(self.base_url)}"

    def _secrets(self) -> list[str]:
        key = self._api_key.get_secret_value()
        values = [] if key == PLACEHOLDER_KEY else [key]
        return values + [v for v in self.options.headers.values() if len(v) >= 8]

    def _scrub(self, text: str) -> str:
        return _redact(text, self._secrets())


# ---------------------------------------------------------------------- configuration


def _resolve_base_url(option: str | None) -> str:
    url = (
        option
        or os.environ.get("EVIDEX_OPENAI_BASE_URL")
        or os.environ.get("OPENAI_BASE_URL")
        or OPENAI_URL
    ).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"base_url {_public_url(url)!r} is not an http(s) URL; "
            "e.g. http://localhost:11434/v1 for Ollama"
        )
    return url.rstrip("/")


def _resolve_api_key(option: SecretStr | None, base_url: str) -> str:
    key = option.get_secret_value() if option is not None else os.environ.get("OPENAI_API_KEY")
    if key and key.strip():
        return key.strip()
    if urlsplit(base_url).hostname == urlsplit(OPENAI_URL).hostname:
        raise ConfigError(
            "the openai judge needs an API key for api.openai.com: set OPENAI_API_KEY or pass "
            "api_key; for a local server set base_url (or EVIDEX_OPENAI_BASE_URL)"
        )
    return PLACEHOLDER_KEY


def _public_url(url: str) -> str:
    """``url`` without user info and query string, where credentials may hide."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


# ---------------------------------------------------------------------- vendor errors


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message") or body.get("error") or body.get("detail")
        if message:
            return str(message)
    return str(exc.message)


def _mentions_format(exc: openai.APIStatusError) -> bool:
    return bool(_FORMAT_WORDS.search(_server_message(exc)))


def _redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _scrub_exception(exc: BaseException, secrets: list[str]) -> None:
    """Remove secrets a server echoed into an SDK exception, which stays chained to ours."""
    if not secrets:
        return
    exc.args = tuple(_redact(a, secrets) if isinstance(a, str) else a for a in exc.args)
    if isinstance(getattr(exc, "message", None), str):
        exc.message = _redact(exc.message, secrets)  # type: ignore[attr-defined]
    if isinstance(exc, openai.APIError) and isinstance(exc.body, Mapping):
        exc.body = {
            k: _redact(v, secrets) if isinstance(v, str) else v for k, v in exc.body.items()
        }


def _retry_after_seconds(value: str | None) -> float | None:
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
