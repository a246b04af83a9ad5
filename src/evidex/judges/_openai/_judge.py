"""The ``openai:MODEL`` judge: options, identity, one call over the pool, error conversion."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import SecretStr

from evidex.errors import ConfigError, EvidexError, JudgeError, JudgeUnavailable
from evidex.judges._openai._http import (
    HTTPFault,
    Interrupted,
    StatusError,
    TimedOut,
    Transport,
    Unreachable,
)
from evidex.judges._openai._options import OpenAIOptions
from evidex.judges._openai._pace import LOCAL, REMOTE, Pace
from evidex.judges._openai._pool import Endpoint, Pool
from evidex.judges._openai._stream import Watch
from evidex.judges._openai._wire import (
    FORMAT_WORDS,
    OPENAI_URL,
    PLACEHOLDER_KEY,
    Kind,
    ParsedReply,
    body_of,
    choose_kind,
    ladder_of,
    on_this_machine,
    parse_answer,
    public_url,
    redact,
    resolve_api_key,
    resolve_base_urls,
    retry_after_seconds,
    scrub_exception,
    server_message,
    url_secrets,
)
from evidex.judges._options import parse_options
from evidex.judging import Judge, JudgeReply, JudgeRequest
from evidex.limits import JudgeGate
from evidex.types import Usage

__all__ = ["OPENAI_URL", "PLACEHOLDER_KEY", "OpenAIJudge"]

logger = logging.getLogger("evidex.judges.openai")


_RETRYABLE = frozenset({408, 409, 429})
_REFUSAL_STATUSES = frozenset({400, 422, 500})
"""Statuses with which servers refuse a structured-output mode (llama-cpp-python: 500)."""
_COOLDOWN_429_S = 1.0
"""How long an endpoint of a pool rests after a 429 that names no ``Retry-After``."""
_MAX_COOLDOWN_S = 60.0
"""The longest rest a ``Retry-After`` buys an endpoint (another endpoint may answer anyway)."""
_PUBLIC_KIND: dict[str, str] = {
    "json_schema": "json_schema",
    "json_object_schema": "json_object",
    "json_object": "json_object",
    "none": "none",
}

_SHOWN: dict[str, str] = {
    "json_schema": "json_schema",
    "json_object_schema": "json_object with the schema",
    "json_object": "json_object",
    "none": "the prompt alone",
}


class OpenAIJudge(Judge):
    """A chat-completions judge for every job. Build it with ``get_judge("openai:MODEL")``.

    Endpoints: ``base_urls`` (several) or ``base_url`` (one) from the options, else
    ``EVIDEX_OPENAI_BASE_URLS`` (comma-separated), ``EVIDEX_OPENAI_BASE_URL``,
    ``OPENAI_BASE_URL``, ``[openai] base_urls``/``base_url`` in the config file, else OpenAI
    itself. ``api_key`` from the option, else ``OPENAI_API_KEY``, shared by every endpoint.
    OpenAI without a key is a :class:`ConfigError`; any other server without a key gets the
    placeholder key ``"not-needed"``, since local servers ignore it.

    Connections are kept alive between calls, one set per event loop (see :mod:`._http`).
    Replies are streamed and each call is watched by its time to the first token and its idle
    gaps, which follow the endpoint's measured replies (:mod:`._pace`); there is no total
    deadline unless ``timeout_s`` sets one, so the harness sets none either.
    """

    jobs: ClassVar[frozenset[str]] = frozenset({"tier", "rerank", "classify", "audit"})
    reads_prompts: ClassVar[bool] = True

    Options = OpenAIOptions

    def __init__(self, model: str, options: OpenAIOptions | None = None) -> None:
        if not model.strip():
            raise ConfigError("the openai judge needs a model: openai:MODEL")
        super().__init__(f"openai:{model}")
        self.model = model
        self.options = options or self.Options()
        self.base_urls = resolve_base_urls(self.options.base_url, self.options.base_urls)
        self.base_url = self.base_urls[0]
        self.context_window = self.options.context_window
        local = all(on_this_machine(u) for u in self.base_urls)
        self.limits = LOCAL if local else REMOTE
        self.timeout_s = self.options.timeout_s
        # a whole-call limit set by hand: the harness's leaves room for one more endpoint of a
        # pool after a timeout; else the judge's own deadlines watch each call's progress
        self.default_timeout_s = None if self.timeout_s is None else 2 * self.timeout_s
        self._api_key = SecretStr(resolve_api_key(self.options.api_key, self.base_urls))
        self._ladder = ladder_of(self.options.structured_output)
        self._reported_model: str | None = None
        per_endpoint = self.options.endpoint_concurrency
        self.pool = Pool(
            self.base_urls,
            limit=per_endpoint,
            breaker_threshold=self.options.endpoint_failures,
            breaker_cooldown_s=self.options.endpoint_cooldown_s,
            pace=self._pace,
        )
        self.pool.on_resize = self._follow_pool
        if per_endpoint is not None:
            self.max_concurrency = per_endpoint * len(self.base_urls)
        self._gate_max: int | None = None
        for name, value in self._headers().items():
            if any(c in name + value for c in "\r\n\0") or not name.strip():
                raise ConfigError(f"the HTTP header {name[:40]!r} has a line break or no name")

    def _pace(self) -> Pace:
        o = self.options
        return Pace(
            self.limits,
            first_token_s=o.first_token_timeout_s,
            idle_s=o.idle_timeout_s,
            total_s=o.timeout_s,
        )

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

    def open_gate(
        self, *, default_limit: int, breaker_threshold: int = 5, breaker_cooldown_s: float = 30.0
    ) -> JudgeGate:
        """The judge's gate; endpoints without a limit of their own take the gate's."""
        gate = super().open_gate(
            default_limit=default_limit,
            breaker_threshold=breaker_threshold,
            breaker_cooldown_s=breaker_cooldown_s,
        )
        if self._gate_max is None:
            self._gate_max = gate.limit.limit
            self.pool.size(gate.limit.limit)
        return gate

    def _follow_pool(self, capacity: int) -> None:
        """The gate admits no more than the endpoints take now, so a call waits for a slot in
        the gate (timed apart as queue time), not inside the call's timeout."""
        if self._gate is not None and self._gate_max is not None:
            self._gate.limit.resize(max(1, min(self._gate_max, capacity)))

    # ------------------------------------------------------------------ identity

    def fingerprint(self) -> Mapping[str, Any]:
        """What changes judgments: the model and how output is constrained. Never the key,
        and not the endpoints: replicas of one model answer alike, so adding, removing or
        reordering them keeps the cache (name a different deployment with ``deployment``)."""
        found: dict[str, Any] = {
            "model": self.model,
            "structured_output": self.options.structured_output,
        }
        if self.options.deployment:
            found["deployment"] = self.options.deployment
        return found

    @property
    def model_version(self) -> str:
        """The model name the server reported on its last answer, else the configured one."""
        return self._reported_model or self.model

    @property
    def structured_output(self) -> str:
        """The mode the first endpoint uses now: ``auto`` until a server refused a mode."""
        return self.mode_of(self.pool.endpoints[0])

    def mode_of(self, endpoint: Endpoint) -> str:
        if self.options.structured_output == "auto" and not endpoint.refused:
            return "auto"
        kind = choose_kind(self._ladder, endpoint.refused, has_schema=True)
        return _PUBLIC_KIND[kind] if kind else "none"

    def endpoint_states(self) -> list[dict[str, Any]]:
        return [e.state() | {"structured_output": self.mode_of(e)} for e in self.pool.endpoints]

    def __repr__(self) -> str:
        where = ", ".join(public_url(u) for u in self.base_urls)
        return f"<OpenAIJudge {self.judge_id} at {where}>"

    # ------------------------------------------------------------------ calls

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        """Send one chat completion to the least busy endpoint; on a transport fault, timeout,
        429 or 5xx send it to the next one. Raise only when no endpoint could answer."""
        tried: list[Endpoint] = []
        failures: list[JudgeUnavailable] = []
        while (endpoint := self.pool.pick(tried)) is not None:
            tried.append(endpoint)
            try:
                return await self._on(endpoint, request)
            except JudgeUnavailable as exc:
                failures.append(exc)
                if len(self.pool.endpoints) > 1:
                    logger.info("%s; trying another endpoint", exc)
            finally:
                self.pool.done(endpoint)
        raise self._none_answered(failures)

    async def _on(self, endpoint: Endpoint, request: JudgeRequest) -> JudgeReply:
        """The call on one endpoint, in the mode it takes, under the endpoint's deadlines; a
        refused mode is remembered and the same call re-sent in the next one, and a streamed
        reply the server interrupted for another request is re-sent once the endpoint takes
        one call at a time (the same attempt, never a fallback)."""
        transport = self._transport(endpoint)
        notes: list[str] = []
        epoch = endpoint.epoch
        held = False
        try:
            while True:
                if not held:
                    await endpoint.limit.acquire()
                    held = True
                kind = choose_kind(self._ladder, endpoint.refused, bool(request.schema))
                if kind is None:  # another call saw the last allowed mode refused
                    raise ConfigError(f"{self._where(endpoint)} refuses every allowed mode")
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug(
                        "%s: %s attempt %d at temperature %g (%s)",
                        self._where(endpoint),
                        request.step or request.job,
                        request.attempt,
                        request.temperature,
                        kind,
                    )
                body = body_of(self.model, request, kind, stream=self.options.stream)
                watch = Watch(endpoint.pace.deadlines(len(body)), endpoint.pace)
                try:
                    parsed = parse_answer(await transport.send("/chat/completions", body, watch))
                except StatusError as exc:
                    if kind != "none" and _is_refusal(exc):
                        notes.extend(self._refused(endpoint, kind, exc))
                        continue
                    raise self._failed(endpoint, exc, epoch) from exc
                except Interrupted as exc:
                    if not self.pool.serialise(endpoint):  # one at a time already
                        raise self._failed(endpoint, exc, epoch) from exc
                    notes.append(self._serialised(endpoint))
                    endpoint.limit.release()  # and wait for the one slot it has now
                    held = False
                    continue
                except (HTTPFault, ValueError) as exc:  # ValueError: not a completion
                    raise self._failed(endpoint, exc, epoch) from exc
                break
        except asyncio.CancelledError:
            self.pool.abandoned(endpoint)
            raise
        finally:
            if held:
                endpoint.limit.release()
        if watch.first_token_s is not None:
            endpoint.pace.observe(watch.first_token_s, watch.longest_gap_s, len(body))
        self.pool.succeeded(endpoint)
        return self._reply(parsed, request, endpoint, notes)

    def _reply(
        self, parsed: ParsedReply, request: JudgeRequest, endpoint: Endpoint, notes: list[str]
    ) -> JudgeReply:
        """The judge reply of a completion; a stream that reported no usage has its prompt
        tokens estimated (:meth:`count_tokens`) and its completion tokens counted in chunks."""
        if parsed.finish_reason == "length":
            logger.info("%s: the reply hit max_tokens and is probably cut off", self.judge_id)
        self._reported_model = parsed.model or self.model
        prompt_tokens = parsed.prompt_tokens
        if not parsed.usage_reported:
            prompt_tokens = sum(self.count_tokens(m.content) for m in request.messages)
        return JudgeReply(
            text=parsed.text,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=parsed.completion_tokens),
            model_version=self._reported_model,
            endpoint=endpoint.public,
            notes=tuple(notes),
            truncated=parsed.finish_reason == "length",
        )

    def _serialised(self, endpoint: Endpoint) -> str:
        note = (
            f"{self._where(endpoint)} ended a streamed reply early when another request "
            "arrived (llama-cpp-python's interrupt_requests does); this endpoint gets one call "
            "at a time from now on"
        )
        logger.warning("%s", note)
        return note

    def _refused(self, endpoint: Endpoint, kind: Kind, exc: StatusError) -> list[str]:
        """Remember the refusal; raise when no allowed mode is left; a note the first time."""
        scrub_exception(exc, self._secrets())
        first = self.pool.refuse(endpoint, kind)
        following = choose_kind(self._ladder, endpoint.refused, has_schema=True)
        detail = self._scrub(server_message(exc.status, exc.text))
        where = self._where(endpoint)
        if following is None:
            raise ConfigError(
                f"{where} rejects response_format {kind} (HTTP {exc.status}: {detail}); "
                "use structured_output='auto' or 'none' with this server"
            ) from exc
        if not first:
            return []
        shown = _SHOWN[following]
        note = (
            f"{where} refused structured output {kind} (HTTP {exc.status}: {detail}); "
            f"this endpoint gets {shown} from now on"
        )
        logger.warning("%s", note)
        return [note]

    def _failed(self, endpoint: Endpoint, exc: Exception, epoch: int) -> EvidexError:
        """Convert the error and record what it says about the endpoint."""
        error = self._convert(exc, endpoint)
        if isinstance(error, JudgeUnavailable):
            status = error.status
            timeout = isinstance(exc, TimedOut)
            cool = None
            if status == 429 or (status is not None and error.retry_after_s is not None):
                wait = _COOLDOWN_429_S if error.retry_after_s is None else error.retry_after_s
                cool = min(wait, _MAX_COOLDOWN_S)
            self.pool.failed(
                endpoint,
                epoch=epoch,
                overloaded=timeout or status == 429,
                broken=status != 429,
                cool_for_s=cool,
            )
        return error

    def _none_answered(self, failures: list[JudgeUnavailable]) -> JudgeUnavailable:
        if len(failures) == 1:
            return failures[0]
        if failures:
            waits = [f.retry_after_s for f in failures if f.retry_after_s is not None]
            error = JudgeUnavailable(
                f"no endpoint of {self.judge_id} could answer: "
                + "; ".join(str(f) for f in failures),
                status=failures[-1].status,
                retry_after_s=min(waits) if waits else None,
            )
            error.__cause__ = failures[-1]
            return error
        lines, wait, drained = self.pool.resting()
        message = f"no endpoint of {self.judge_id} may take a call: " + "; ".join(lines)
        if drained:
            from evidex.errors import CircuitOpenError

            return CircuitOpenError(message, retry_after_s=wait)
        return JudgeUnavailable(message, retry_after_s=wait)

    async def aclose(self) -> None:
        """Close the connections of the calling event loop (the others close with their
        loops)."""
        for endpoint in self.pool.endpoints:
            if endpoint.transport is not None:
                await endpoint.transport.aclose()

    def _transport(self, endpoint: Endpoint) -> Transport:
        if endpoint.transport is None:
            endpoint.transport = Transport(
                endpoint.url, headers=self._headers(), max_retries=self.options.max_retries
            )
        return endpoint.transport

    # ------------------------------------------------------------------ errors

    def _convert(self, exc: Exception, endpoint: Endpoint) -> EvidexError:
        """The one place where transport and server errors become evidex errors (scrubbed of
        secrets): the :class:`HTTPFault` kinds, and ``ValueError`` for a 2xx reply that is not
        a chat completion."""
        scrub_exception(exc, self._secrets())
        where = self._where(endpoint)
        if isinstance(exc, ValueError):
            return self._malformed(endpoint)
        if isinstance(exc, TimedOut):
            return JudgeUnavailable(f"{where} {exc}")
        if isinstance(exc, Unreachable):
            cause = self._scrub(str(exc)) or type(exc).__name__
            return JudgeUnavailable(f"cannot reach {where}: {cause}")
        if isinstance(exc, StatusError):
            return self._convert_status(exc, where)
        return JudgeError(f"{where}: {self._scrub(str(exc))}")

    def _convert_status(self, exc: StatusError, where: str) -> EvidexError:
        status = exc.status
        detail = self._scrub(server_message(status, exc.text))
        if status in _RETRYABLE or status >= 500:
            after = exc.retry_after
            wait = f", retry after {after}s" if after else ""
            return JudgeUnavailable(
                f"{where} answered HTTP {status}{wait}: {detail}",
                status=status,
                retry_after_s=retry_after_seconds(after),
            )
        if status in (401, 403):
            hint = "check OPENAI_API_KEY or the api_key option"
            return ConfigError(f"{where} refused the credentials (HTTP {status}: {detail}); {hint}")
        if status == 404:
            return ConfigError(
                f"{where} has no model {self.model!r} or no chat endpoint (HTTP 404: {detail}); "
                "check the model name and that base_url is the API root (often ending in /v1)"
            )
        if self.options.structured_output != "none" and FORMAT_WORDS.search(detail):
            return ConfigError(
                f"{where} rejects response_format (HTTP {status}: {detail}); use "
                "structured_output='auto' or 'none' with this server"
            )
        return ConfigError(
            f"{where} rejected the request (HTTP {status}: {detail}); check the model's "
            "context_window and the judge options"
        )

    def _malformed(self, endpoint: Endpoint) -> JudgeUnavailable:
        where = self._where(endpoint)
        return JudgeUnavailable(f"{where} answered something that is not a chat completion")

    def _headers(self) -> dict[str, str]:
        """What every request sends; a header of the options replaces ours of the same name
        (names compare without case, as HTTP does)."""
        key = self._api_key.get_secret_value()
        ours = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "User-Agent": "evidex",
        }
        given = {name.lower() for name in self.options.headers}
        kept = {name: value for name, value in ours.items() if name.lower() not in given}
        return kept | dict(self.options.headers)

    def _where(self, endpoint: Endpoint) -> str:
        return f"{self.judge_id} at {endpoint.public}"

    def _secrets(self) -> list[str]:
        key = self._api_key.get_secret_value()
        values = [] if key == PLACEHOLDER_KEY else [key]
        values += [v for v in self.options.headers.values() if len(v) >= 8]
        return values + [s for url in self.base_urls for s in url_secrets(url)]

    def _scrub(self, text: str) -> str:
        return redact(text, self._secrets())


def _is_refusal(exc: StatusError) -> bool:
    """A server refusing the structured-output mode, not failing: it names the field."""
    return exc.status in _REFUSAL_STATUSES and bool(
        FORMAT_WORDS.search(server_message(exc.status, exc.text))
    )
