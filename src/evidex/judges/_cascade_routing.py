"""A cascade's routing as options and files give it: the band, the frontier rule, the files
``evidex calibrate tier`` writes, and the shipped defaults (see :mod:`evidex.judges.cascade`).

The file is versioned (:data:`FORMAT`): a band file written before the frontier rule existed
has no ``format`` and no ``rule``, and is read as a band.
"""

from __future__ import annotations

import importlib.resources
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from evidex.errors import ConfigError
from evidex.frontier import FrontierRule

__all__ = [
    "FORMAT",
    "FRONTIER_OPTIONS",
    "Band",
    "FrontierFile",
    "frontier_of",
    "load_band",
    "load_routing",
    "shipped_frontier",
]

FORMAT = 2
"""The format of the routing files this version writes: 2 says its ``rule`` (``band`` or
``frontier``); a file without ``format`` is a band file of format 1, read as a band."""
FRONTIER_OPTIONS = ("budget", "start", "step", "width")
"""The frontier rule's settings as options of the cascade."""


class Band(BaseModel):
    """Scores in ``[low, high)`` are uncertain: those items go to the expensive judge.

    ``low == high`` sends nothing (the cheap judge alone); ``-inf:inf`` sends everything.
    ``cheap_version``/``expensive_version`` are the stages' model versions when it was fitted
    (empty for a band given by hand); ``fit`` says how it was obtained.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = FORMAT
    rule: Literal["band"] = "band"
    low: float
    high: float
    cheap: str = ""
    cheap_version: str = ""
    expensive: str = ""
    expensive_version: str = ""
    none_relevant_below: float | None = None
    """For a job that gives one verdict over all of a query's passages: the cheap stage
    settles the query when no passage scores this much (nothing on the query's topic);
    None: the band's ``low`` (the score below which the stage settles a passage alone)."""
    fit: dict[str, Any] = Field(default_factory=dict)

    @field_validator("low", "high", mode="before")
    @classmethod
    def _unbounded(cls, value: Any, info: ValidationInfo) -> Any:
        """``null`` in a file is an open end (JSON has no infinity)."""
        if value is None:
            return -math.inf if info.field_name == "low" else math.inf
        return value

    def to_json(self) -> dict[str, Any]:
        """The band as a JSON object (open ends as ``null``)."""
        out = self.model_dump()
        for name in ("low", "high"):
            out[name] = None if math.isinf(out[name]) else out[name]
        return out

    def uncertain(self, score: float) -> bool:
        return self.low <= score < self.high

    def label(self) -> str:
        return f"[{self.low:.4g}, {self.high:.4g})"

    @classmethod
    def parse(cls, text: str) -> Band:
        """``LOW:HIGH`` (``-inf`` and ``inf`` allowed)."""
        low, sep, high = str(text).partition(":")
        try:
            band = cls(low=float(low), high=float(high)) if sep else None
        except ValueError:
            band = None
        if band is None or band.low > band.high or math.isnan(band.low) or math.isnan(band.high):
            raise ConfigError(f"band must be LOW:HIGH with LOW <= HIGH, got {text!r}")
        return band


def _shipped(name: str) -> bytes:
    return (
        importlib.resources.files("evidex").joinpath("data").joinpath("cascade").joinpath(name)
    ).read_bytes()


class FrontierFile(BaseModel):
    """A frontier rule file, as the shipped default is written (``data/cascade/frontier.json``,
    fitted by :func:`~evidex.evaluate.cascade_frontier.fit_frontier`): the rule's settings,
    both stages' ids and model versions when it was fitted, and how it was fitted.
    ``evidex calibrate`` does not write one yet; ``band_path=`` reads one in this shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = FORMAT
    rule: Literal["frontier"] = "frontier"
    frontier: FrontierRule
    cheap: str = ""
    cheap_version: str = ""
    expensive: str = ""
    expensive_version: str = ""
    fit: dict[str, Any] = Field(default_factory=dict)


def load_routing(path: str | Path) -> Band | FrontierFile:
    """A routing file: a band (format 1, or 2 with ``"rule": "band"``) or a frontier rule."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a cascade band file: {exc}") from exc
    written = raw.get("format", 1) if isinstance(raw, dict) else 1
    if isinstance(written, int) and written > FORMAT:
        raise ConfigError(
            f"{path}: a cascade routing file of format {written}, written by a newer evidex "
            f"(this one reads formats 1 to {FORMAT}); upgrade evidex"
        )
    model: type[Band] | type[FrontierFile] = Band
    if isinstance(raw, dict) and raw.get("rule") == "frontier":
        model = FrontierFile
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a cascade band file: {exc}") from exc


def load_band(path: str | Path | None, cheap_id: str) -> Band | None:
    """The band of a file (a calibration's ``cascade_band.json``) or, without a path, the
    shipped default for ``cheap_id`` (None when there is none)."""
    if path is None:
        defaults = json.loads(_shipped("band.json"))
        entry = defaults.get(cheap_id)
        return None if entry is None else Band.model_validate(entry)
    found = load_routing(path)
    if not isinstance(found, Band):
        raise ConfigError(f"{path}: holds a frontier rule, not a band")
    return found


def shipped_frontier(cheap_id: str) -> FrontierFile | None:
    """The shipped frontier rule for ``cheap_id`` (``evidex/data/cascade/frontier.json``)."""
    entry = json.loads(_shipped("frontier.json")).get(cheap_id)
    return None if entry is None else FrontierFile.model_validate(entry)


def frontier_of(
    own: Mapping[str, Any], routed: Band | FrontierFile | None, cheap_id: str
) -> tuple[FrontierRule | FrontierFile | None, str]:
    """The frontier rule the options ask for, and where its settings came from: ``rule=``
    (else ``frontier`` when a frontier setting or a frontier file is given), its settings from
    the options over the file's (``band_path``), else over the shipped default's."""
    given = {name: own[name] for name in FRONTIER_OPTIONS if name in own}
    rule = str(
        own.get("rule") or ("frontier" if given or isinstance(routed, FrontierFile) else "band")
    )
    if rule not in ("band", "frontier"):
        raise ConfigError(f"the cascade's rule is band or frontier, got {rule!r}")
    if rule == "band":
        if given:
            raise ConfigError(f"{', '.join(given)}: settings of rule=frontier, not of rule=band")
        if isinstance(routed, FrontierFile):
            raise ConfigError(
                f"{own['band_path']} holds a frontier rule; rule=band needs a band file or "
                f"band=LOW:HIGH"
            )
        return None, ""
    base = routed if isinstance(routed, FrontierFile) else shipped_frontier(cheap_id)
    source = str(own["band_path"]) if isinstance(routed, FrontierFile) else "shipped default"
    settings = {**(base.frontier.model_dump() if base is not None else {}), **given}
    missing = [name for name in ("budget", "start", "step") if name not in settings]
    if missing:
        raise ConfigError(
            f"rule=frontier needs {', '.join(missing)} (no frontier is shipped for {cheap_id}): "
            f"give them as options (budget=, start=, step=), or band_path= a frontier file"
        )
    try:
        frontier = FrontierRule.model_validate(settings)
    except ValidationError as exc:
        raise ConfigError(f"the cascade's frontier rule: {_problems(exc)}") from None
    if base is None:
        return frontier, "options"
    if given:
        return base.model_copy(update={"frontier": frontier}), f"options over {source}"
    return base, source


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'rule'}: {e['msg']}" for e in exc.errors())
