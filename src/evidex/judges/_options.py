"""Judge options: validated by each backend's pydantic ``Options`` model, reported safely.

A misspelled option must fail loudly (a silently ignored ``temprature`` is a bug that looks like
a bad model). The message names the option and the known ones, and never echoes the value: an
option may be a secret such as an API key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from evidex.errors import ConfigError

__all__ = ["parse_options"]

OptionsT = TypeVar("OptionsT", bound=BaseModel)


def parse_options(model: type[OptionsT], options: Mapping[str, Any], spec: str) -> OptionsT:
    """Validate ``options`` for the judge ``spec``; raise :class:`ConfigError` naming each
    bad option, without its value."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        known = ", ".join(model.model_fields)
        problems = []
        for error in exc.errors(include_input=False, include_url=False):
            name = ".".join(str(part) for part in error["loc"]) or "options"
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown option {name!r}")
            else:
                problems.append(f"option {name!r}: {error['msg']}")
        raise ConfigError(
            f"bad options for {spec}: {'; '.join(problems)} (known options: {known})"
        ) from None
