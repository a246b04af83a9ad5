"""``openai:MODEL``: a judge behind any OpenAI-compatible chat API, over one server or several.

One backend serves OpenAI, Azure's v1 endpoint, vLLM, Ollama, the llama.cpp server and
LM Studio: they differ by configuration (``base_url``/``base_urls``, ``api_key``), not by code.

What lives here: :mod:`._judge` (the judge: identity, one call, error conversion),
:mod:`._options` (its options), :mod:`._pool` (the endpoints of a pool: routing to the least
busy one, a breaker, an adaptive in-flight limit and a cooldown each), :mod:`._pace` (each
endpoint's measured replies and the deadlines of its next calls), :mod:`._wire` (the request
body, the structured-output modes, reading the reply, streamed or not, keeping credentials out
of texts), :mod:`._http` (sending it: an aiohttp session per endpoint and event loop) and
:mod:`._stream` (watching a call's progress and reading server-sent events). It may import
the root modules of evidex, the standard library and aiohttp; the openai SDK is not used
(:mod:`._http` says why).

Several endpoints (replicas of one model) form a pool: a call goes to the endpoint with the
fewest outstanding calls whose breaker allows it; a transport fault, timeout, 429 or 5xx there
sends the same call to another endpoint before the harness sees a failed attempt
(:class:`~evidex.errors.JudgeUnavailable` only when no endpoint could answer). A failing
endpoint is drained (its breaker opens) and probed back by one trial call; a 429 or a
``Retry-After`` rests it for that long; its in-flight limit halves on 429s and timeouts and
grows back on successes.

Structured output is negotiated per endpoint (``structured_output="auto"``): JSON schema first;
a refusal that names ``response_format`` (HTTP 400, 422, or 500 as llama-cpp-python's server
answers) is remembered for that endpoint, written to the audit log as a note, and the same call
goes out again with ``json_object`` carrying the schema, then bare ``json_object``, then the
prompt alone (the harness's JSON extraction and validation then do the work). A refusal never
becomes a fallback of the passages.

Replies are streamed, and a call has no total time: it is given up when its first token is late
or its reply stalls, both measured against the endpoint's recent replies (:mod:`._pace`), and
its connection is closed so that the server can stop writing it.

Errors are converted in one place (``OpenAIJudge._convert``): transport faults, timeouts,
429 and 5xx become :class:`JudgeUnavailable` (retried by the harness, counted by the breaker);
a refused key, an unknown model or a request the server will never accept becomes
:class:`ConfigError`, which stops the run instead of burning retries. The API key never appears
in ``judge_id``, ``fingerprint()``, ``repr``, error messages or logs: server error texts are
scrubbed of it before they are shown anywhere, including the chained exception.
"""

from evidex.judges._openai._judge import OPENAI_URL, PLACEHOLDER_KEY, OpenAIJudge
from evidex.judges._openai._wire import retry_after_seconds as _retry_after_seconds

__all__ = ["OPENAI_URL", "PLACEHOLDER_KEY", "OpenAIJudge", "_retry_after_seconds"]
