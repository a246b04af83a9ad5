"""Small helpers shared by the evaluation modules."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["jsonable"]


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
