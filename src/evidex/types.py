"""Types shared by every job: passages, risk levels, result provenance, tier schemes.

Each job's own vocabulary (its input, options, item and result types) is importable from one
module, ``evidex.jobs.<job>``, and re-exported from ``evidex``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from evidex.errors import ConfigError

__all__ = [
    "DEFAULT_TIERS",
    "Event",
    "Passage",
    "PassageLike",
    "RiskLevel",
    "Source",
    "Text",
    "TierDefinition",
    "TierScheme",
    "Usage",
    "check_text",
    "lone_surrogate",
]

Source = Literal["judge", "cache", "fallback"]
"""Where a result came from. ``fallback`` always comes with a reason and a review item."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate in ``text``, or None. Such a code point comes
    from a JSON escape (``"\\ud800"``) or undecodable bytes read with ``surrogateescape`` (a
    command line); it is not Unicode text, so no store, tokenizer or UTF-8 reply can take it."""
    found = _SURROGATE.search(text)
    return found.start() if found else None


def check_text(value: str) -> str:
    """``value`` if it is valid Unicode text, else :class:`ValueError` saying where it is not."""
    position = lone_surrogate(value)
    if position is not None:
        raise ValueError(
            f"holds a lone surrogate (U+{ord(value[position]):04X}) at character {position}: "
            "not valid Unicode text"
        )
    return value


Text = Annotated[str, AfterValidator(check_text)]
"""A string that is valid Unicode text (no lone surrogates): the type of every passage field."""


class RiskLevel(str, Enum):
    """How costly a wrong judgment is; drives review routing and conservatism."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Passage(BaseModel):
    """One retrieved passage. ``passage_id`` is the join key across batches and jobs."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    passage_id: Text = Field(validation_alias=AliasChoices("passage_id", "id", "pid", "docid"))
    text: Text
    title: Text | None = None
    url: Text | None = None
    rank: int | None = None
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("passage_id", mode="before")
    @classmethod
    def _id_is_text(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("passage_id", "text")
    @classmethod
    def _not_blank(cls, value: str, info: ValidationInfo) -> str:
        if not value.strip():
            raise ValueError(f"{info.field_name} must not be empty")
        return value


PassageLike = Passage | str | Mapping[str, Any]
"""What a job accepts as a passage: a :class:`Passage`, its text alone, or a mapping."""


class Usage(BaseModel):
    """Token usage of one or more judge calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class Event(BaseModel):
    """Something a caller should know happened to its input (duplicate removed, truncation...).

    Events are never silent: they are returned with the result and written to the audit log.
    """

    kind: str
    detail: str
    passage_ids: list[str] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def about(cls, passage_id: str, kind: str, detail: str, **data: Any) -> Event:
        """An event about one passage."""
        return cls(kind=kind, detail=detail, passage_ids=[passage_id], data=data)


class TierDefinition(BaseModel):
    """One relevance tier: a name (the enum value the judge must use) and its definition."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    definition: str

    @field_validator("name")
    @classmethod
    def _name_is_token(cls, value: str) -> str:
        if not value or value != value.strip() or any(ch.isspace() for ch in value):
            raise ValueError(f"tier name {value!r} must be a non-empty word without spaces")
        return value


class TierScheme(BaseModel):
    """An ordered set of tiers, most relevant first.

    The order matters: selection policies take a prefix of it (``strict`` = the first tier,
    ``standard`` = the first two, ``broad`` = all but the last), high-risk review samples the
    first tier, and the fallback tier must be one of them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tiers: tuple[TierDefinition, ...]
    fallback_tier: str = "contextually-relevant"

    @model_validator(mode="after")
    def _consistent(self) -> TierScheme:
        names = [t.name for t in self.tiers]
        if len(names) < 2:
            raise ValueError("a tier scheme needs at least two tiers")
        if len(set(names)) != len(names):
            raise ValueError(f"tier names must be unique, got {names}")
        if self.fallback_tier not in names:
            raise ValueError(f"fallback_tier {self.fallback_tier!r} is not one of {names}")
        return self

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tiers]

    @property
    def top(self) -> str:
        return self.tiers[0].name

    @property
    def bottom(self) -> str:
        return self.tiers[-1].name

    def index(self, name: str) -> int:
        return self.names.index(name)

    @staticmethod
    def count_key(name: str) -> str:
        """The ``tier_summary`` key of a tier:
        ``directly-supporting`` → ``directly_supporting_count``."""
        return name.replace("-", "_") + "_count"

    def summary(self, tiers: Iterable[str]) -> dict[str, int]:
        """Counts per tier, recomputed by code (the judge's own counts are never trusted)."""
        counts = {self.count_key(n): 0 for n in self.names}
        for tier in tiers:
            counts[self.count_key(tier)] += 1
        return counts

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> TierScheme:
        return cls.model_validate(data)

    @classmethod
    def from_file(cls, path: str | Path) -> TierScheme:
        """Read a tier scheme from YAML or JSON.

        Either ``{"tiers": [{"name", "definition"}, ...], "fallback_tier": ...}`` or a bare list
        of tiers (the fallback then defaults to the second tier).
        """
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
            data = json.loads(raw) if path.suffix == ".json" else yaml.safe_load(raw)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read tier definitions: {exc}") from exc
        if isinstance(data, list):
            data = {"tiers": data}
            if len(data["tiers"]) >= 2 and isinstance(data["tiers"][1], dict):
                data["fallback_tier"] = data["tiers"][1].get("name")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping with 'tiers' or a list of tiers")
        try:
            return cls.model_validate(data)
        except ValueError as exc:
            raise ConfigError(f"{path}: invalid tier definitions: {exc}") from exc


DEFAULT_TIERS = TierScheme(
    tiers=(
        TierDefinition(
            name="directly-supporting",
            definition=(
                "Holds specific facts, figures or statements that answer the query or back up "
                "an answer to it; its content would be cited in a well-grounded answer."
            ),
        ),
        TierDefinition(
            name="contextually-relevant",
            definition=(
                "Gives background, definitions or neighbouring concepts that help to understand "
                "the query's domain, without answering the query itself; useful as supplementary "
                "context."
            ),
        ),
        TierDefinition(
            name="tangentially-related",
            definition=(
                "Mentions the query's topic or nearby ideas but offers nothing that helps to "
                "answer it; it shares vocabulary, not substance."
            ),
        ),
        TierDefinition(
            name="irrelevant",
            definition=(
                "Has no meaningful link to the query; any shared words are incidental and the "
                "passage is about something else."
            ),
        ),
    ),
    fallback_tier="contextually-relevant",
)


AUDIT_STATUSES = (
    "fully_supported",
    "partially_supported",
    "inferred",
    "unsupported",
    "contradicted",
)
"""The statuses a reviewer may give an audited claim (the support levels and
``contradicted``)."""
