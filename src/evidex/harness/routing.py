"""What review routing shares across jobs. Each job's rules are small functions of its result
(:meth:`~evidex.harness.job.JobSpec.reviews`); the harness writes the items they raise."""

from __future__ import annotations

import dataclasses
from typing import Any

from evidex._text import sha256_hex
from evidex.taxonomy import Taxonomy
from evidex.types import Passage, TierScheme

__all__ = ["batch_passages", "batch_vocabulary", "sampled"]


def sampled(run_id: str, key: str, rate: float) -> bool:
    """Whether ``key`` falls in a ``rate`` sample of its run. Deterministic per run and key, so
    a re-run of the same run id routes the same items."""
    return int(sha256_hex(f"{run_id}:{key}")[:8], 16) / 0xFFFFFFFF < rate


def batch_passages(batch: Any) -> list[Passage]:
    """The passages a batch shows the judge (fields holding a passage or a tuple of them), for
    the review item of a fallback: the reviewer reads them in full."""
    found: list[Passage] = []
    for value in _fields(batch):
        items = value if isinstance(value, (tuple, list)) else (value,)
        found += [p for p in items if isinstance(p, Passage)]
    return found


def batch_vocabulary(batch: Any) -> dict[str, list[str]]:
    """What a reviewer may decide on a fallback's item: the batch's tier names or labels."""
    found: dict[str, list[str]] = {}
    for value in _fields(batch):
        if isinstance(value, TierScheme):
            found["tiers"] = list(value.names)
        elif isinstance(value, Taxonomy):
            found["labels"] = list(value.names)
    return found


def _fields(batch: Any) -> list[Any]:
    if not dataclasses.is_dataclass(batch) or isinstance(batch, type):
        return []
    return [getattr(batch, f.name) for f in dataclasses.fields(batch)]
