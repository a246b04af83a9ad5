"""What review routing shares across jobs. Each job's rules are small functions of its result
(:meth:`~evidex.harness.job.JobSpec.reviews`); the harness writes the items they raise.

A job input raises one item per reason: the fallbacks of every step of one input (audit's
extraction and grading, rerank's windows, comparisons and score batches, tier's batches) are
one item, :func:`merged_review` folding each further step's attempts into it."""

from __future__ import annotations

import dataclasses
from typing import Any

from evidex._text import sha256_hex
from evidex.harness.ports import ReviewRequest
from evidex.taxonomy import Taxonomy
from evidex.types import Passage, TierScheme

__all__ = ["batch_passages", "batch_vocabulary", "merged_review", "sampled"]

LATEST = frozenset({"step", "errors", "last_raw_output", "fallback"})
"""Payload keys of one step's exchange: the latest step's stand at the top level (where items
of before had their only step's); ``steps`` holds every step's."""


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


def merged_review(open_item: ReviewRequest, new: ReviewRequest) -> ReviewRequest:
    """The item of an input that already has one, with ``new``'s step folded in: its passage
    ids and passages added, its attempts appended to ``steps``, a list it names joined to the
    item's (equal entries once, such as the claims of two batches), other fields kept as the
    item has them unless it has none. The reason stays the first step's: the reason the input
    is in the queue."""
    old, add = open_item.payload, new.payload
    payload = dict(old)
    for key, value in add.items():
        mine = payload.get(key)
        if key in LATEST or mine is None:
            payload[key] = value
        elif isinstance(mine, list) and isinstance(value, list):
            payload[key] = mine + [v for v in value if v not in mine]
    return open_item.model_copy(
        update={
            "passage_ids": list(dict.fromkeys([*open_item.passage_ids, *new.passage_ids])),
            "payload": payload,
        }
    )
