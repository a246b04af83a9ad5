"""Settings: explicit arguments > environment > config file > defaults.

The file is TOML, at ``EVIDEX_CONFIG`` or ``config.toml`` in the user config dir::

    db = "postgresql+psycopg://evidex@db/evidex"
    timeout_s = 60
    max_concurrency = 8

    [judges]
    tier = "openai:gpt-4o-mini"

    [openai]
    base_urls = ["http://gpu1:8000/v1", "http://gpu2:8000/v1"]   # or base_url = "..."

    [prompts]                      # your own wording of a job's prompt, a file per job
    tier = "/etc/evidex/tier-prompt.txt"

    [prices]   # per 1M tokens, keyed by judge spec (see evidex.pricing)
    "openai:gpt-4o-mini" = { input = 0.15, output = 0.60 }

    [review]   # decisions per item and assignment (see evidex.review_policy)
    decisions = 1
    rules = [{ risk = "high", decisions = 2 }]

Environment variables: ``EVIDEX_DB``, ``EVIDEX_TIMEOUT_S``, ``EVIDEX_MAX_CONCURRENCY``,
``EVIDEX_JUDGE_<JOB>`` (``EVIDEX_JUDGE_TIER=openai:gpt-4o-mini``), ``EVIDEX_PROMPT_<JOB>`` (a
prompt file), and the servers of ``openai:``
judges: ``EVIDEX_OPENAI_BASE_URLS`` (comma-separated), else ``EVIDEX_OPENAI_BASE_URL``, else
``OPENAI_BASE_URL``. The servers are one setting: a layer that names any replaces the file's.
``EVIDEX_PRICES`` is a JSON object of prices (``{"openai:gpt-4o-mini": {"input": 0.15,
"output": 0.6}}``); each layer's prices add to (or replace, model by model) the file's.
An unknown key in the file is an error, not a silent default.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evidex._registered import JOBS as REGISTERED
from evidex.errors import ConfigError
from evidex.pricing import Price
from evidex.review_policy import ReviewSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["OpenAISettings", "Settings", "load_settings"]

JOBS = tuple(REGISTERED)


class OpenAISettings(BaseModel):
    """The servers of ``openai:`` judges that name none in their options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    base_urls: list[str] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_form(self) -> OpenAISettings:
        if self.base_url and self.base_urls:
            raise ValueError("[openai]: give base_url (one server) or base_urls, not both")
        return self

    def urls(self) -> tuple[str, ...]:
        """The configured servers (none: the judge's default)."""
        return tuple(self.base_urls or ([self.base_url] if self.base_url else []))


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    db: str | None = None
    timeout_s: float | None = Field(
        default=None, gt=0, description="seconds per judge call; None: the judge's own default"
    )
    max_concurrency: int = Field(default=4, ge=1)
    split_batches: bool = Field(
        default=True,
        description="split a batch whose replies never validate and ask its halves again, "
        "down to one item, before any fallback",
    )
    max_item_attempts: int = Field(
        default=8, ge=1, description="attempts one item may take part in, splits included"
    )
    adapt_batch_size: bool = Field(
        default=True,
        description="smaller batches for a judge whose batches keep failing, larger again as "
        "its replies validate",
    )
    judges: dict[str, str] = Field(
        default_factory=lambda: {job: r.default_judge for job, r in REGISTERED.items()}
    )
    openai: OpenAISettings = Field(default_factory=OpenAISettings)
    prompts: dict[str, str] = Field(
        default_factory=dict,
        description="job → prompt file used when a call gives no prompt of its own; the "
        "service's only source of custom prompts",
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="judge spec → price per 1M tokens (evidex.pricing)"
    )
    review: ReviewSettings = Field(
        default_factory=ReviewSettings,
        description="decisions per review item and who is assigned (evidex.review_policy)",
    )
    reports: str = Field(
        default="reports",
        description="where the review UI reads calibration records (calibration-JOB/) and "
        "evaluation reports (each report.json below it, to pin a baseline run); evidex eval "
        "and evidex calibrate write under reports/ unless told otherwise",
    )


def _config_path() -> Path:
    configured = os.environ.get("EVIDEX_CONFIG")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("evidex")) / "config.toml"


def _from_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        if os.environ.get("EVIDEX_CONFIG"):
            raise ConfigError(f"{path}: EVIDEX_CONFIG names a file that does not exist")
        return {}
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        return data
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc}") from exc


def _from_env() -> dict[str, Any]:
    values: dict[str, Any] = {}
    env = os.environ
    if env.get("EVIDEX_DB"):
        db = env["EVIDEX_DB"]
        values["db"] = db if "://" in db else f"sqlite:///{Path(db).expanduser()}"
    for key, name in (
        ("timeout_s", "EVIDEX_TIMEOUT_S"),
        ("max_concurrency", "EVIDEX_MAX_CONCURRENCY"),
        ("split_batches", "EVIDEX_SPLIT_BATCHES"),
        ("max_item_attempts", "EVIDEX_MAX_ITEM_ATTEMPTS"),
        ("adapt_batch_size", "EVIDEX_ADAPT_BATCH_SIZE"),
        ("reports", "EVIDEX_REPORTS"),
    ):
        if env.get(name):
            values[key] = env[name]
    for prefix, setting in (("EVIDEX_JUDGE_", "judges"), ("EVIDEX_PROMPT_", "prompts")):
        per_job = {job: env[prefix + job.upper()] for job in JOBS if env.get(prefix + job.upper())}
        if per_job:
            values[setting] = per_job
    several = [u.strip() for u in env.get("EVIDEX_OPENAI_BASE_URLS", "").split(",") if u.strip()]
    one = env.get("EVIDEX_OPENAI_BASE_URL") or env.get("OPENAI_BASE_URL")
    if several:
        values["openai"] = {"base_urls": several}
    elif one and one.strip():
        values["openai"] = {"base_url": one.strip()}
    if env.get("EVIDEX_PRICES", "").strip():
        try:
            values["prices"] = json.loads(env["EVIDEX_PRICES"])
        except ValueError as exc:
            raise ConfigError(f"EVIDEX_PRICES is not a JSON object of prices: {exc}") from exc
    return values


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Merge the layers; ``overrides`` (explicit arguments) win, ``None`` values are ignored."""
    defaults = Settings()
    layers = [_from_file(Path(path) if path else _config_path()), _from_env()]
    layers.append({k: v for k, v in overrides.items() if v is not None})
    merged: dict[str, Any] = {}
    judges = dict(defaults.judges)
    prompts: dict[str, str] = {}
    servers = ("base_url", "base_urls")
    for layer in layers:
        for key, value in layer.items():
            if key == "openai" and isinstance(value, dict):
                known = dict(merged.get("openai") or {})
                if set(value) & set(servers):  # the servers are one setting
                    known = {k: v for k, v in known.items() if k not in servers}
                merged["openai"] = known | value
            elif key == "prices" and isinstance(value, dict):
                merged["prices"] = {**merged.get("prices", {}), **value}
            elif key in ("judges", "prompts") and isinstance(value, dict):
                unknown = set(value) - set(JOBS)
                if unknown:
                    raise ConfigError(
                        f"unknown job(s) in {key}: {sorted(unknown)}; jobs are {list(JOBS)}"
                    )
                (judges if key == "judges" else prompts).update(value)
            else:
                merged[key] = value
    try:
        return Settings(**merged, judges=judges, prompts=prompts)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {exc}") from exc
