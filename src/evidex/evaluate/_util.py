"""Small helpers shared by the evaluation modules."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from evidex.errors import ConfigError

__all__ = ["jsonable", "read_json_object"]


def jsonable(value: Any) -> Any:
    """``value`` with every ``nan`` replaced by ``None``: JSON has no NaN, and an undefined
    figure (kappa on a single label) must read as undefined, not as a number."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def read_json_object(path: str | Path, what: str) -> dict[str, Any]:
    """A JSON object from ``path``; anything else is a :class:`ConfigError` naming ``what``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} holds a JSON object")
    return data
