"""The options of the ``openai:MODEL`` judge (:class:`OpenAIOptions`, also
``OpenAIJudge.Options``): where the servers are, the key, the deadlines of a call, structured
output, and how a pool of servers shares the calls."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

__all__ = ["OpenAIOptions", "StructuredOutput"]

StructuredOutput = Literal["auto", "json_schema", "json_object", "none"]


class OpenAIOptions(BaseModel):
    """Options of ``openai:MODEL``; a misspelled one is a :class:`ConfigError`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(
        default=None, description="the server's API root, e.g. http://localhost:11434/v1"
    )
    base_urls: list[str] | None = Field(
        default=None,
        min_length=1,
        description="several servers of the same model (replicas): one pool",
    )
    api_key: SecretStr | None = Field(default=None, description="default: OPENAI_API_KEY")
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="a whole-request limit; default none: a request is watched by its first "
        "token and its idle gaps instead (first_token_timeout_s, idle_timeout_s)",
    )
    first_token_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="seconds to the reply's first token (the whole reply from a server that "
        "does not stream); default: 6x the slowest of the endpoint's last 20, between 30 s "
        "and 60 s for an API or 900 s for a server on this machine (a loopback address), "
        "where it is also the wait before anything was measured",
    )
    idle_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="seconds a streamed reply may stall between two tokens; default: 10x the "
        "longest gap of the endpoint's last 20 replies, between 10 s and 60 s",
    )
    stream: bool = Field(
        default=True,
        description="ask for the reply as server-sent events: progress to time it by, and a "
        "request given up is stopped on servers that notice a closed connection",
    )
    max_retries: int = Field(
        default=0,
        ge=0,
        description="retries of a connection that could not be opened; 0 "
        "because the harness retries",
    )
    structured_output: StructuredOutput = Field(
        default="auto",
        description="auto: negotiated per endpoint (json_schema, then json_object with the "
        "schema, then prompt-only), each refusal remembered; json_schema and json_object: "
        "insist (a refusal is a ConfigError); none: prompt-only",
    )
    context_window: int = Field(
        default=8192, ge=1024, description="tokens the model accepts; sizes truncation"
    )
    headers: dict[str, str] = Field(
        default_factory=dict, repr=False, description="extra HTTP headers (may hold secrets)"
    )
    endpoint_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="calls one endpoint may have in flight at most (adapted: halved on "
        "429s and timeouts, grown back on successes); the judge's limit is then their sum. "
        "Default: each endpoint may take the judge's whole limit",
    )
    endpoint_failures: int = Field(
        default=3, ge=1, description="consecutive failures that drain an endpoint of a pool"
    )
    endpoint_cooldown_s: float = Field(
        default=10.0, gt=0, description="how long a drained endpoint rests before a probe"
    )
    deployment: str | None = Field(
        default=None,
        description="a name for what serves the model (e.g. vllm-awq); enters the cache "
        "key, where the endpoints' URLs do not",
    )
