"""The content address of a judgment: what the cache is keyed by and the audit log records."""

from __future__ import annotations

from typing import Any

from evidex._text import sha256_hex, stable_json
from evidex.judging import Judge
from evidex.tasks.base import Step

__all__ = ["CacheKeys"]


class CacheKeys:
    """Cache keys of one judge's batches: the sha-256 of the canonical JSON of a batch's input
    together with what judges it (job, step, prompt version, the judge and its options).

    Only the input changes from batch to batch, so the rest is serialised once per step and
    spliced in after the input (``input`` sorts first in canonical JSON): the same text, and
    so the same key, as serialising the whole material on every call."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._rest: dict[tuple[str, str, str], str] = {}

    def of(self, step: Step[Any, Any], batch: Any) -> str:
        which = (step.job, step.name, step.template.version)
        rest = self._rest.get(which)
        if rest is None:
            material = {
                "job": step.job,
                "step": step.name,
                "prompt": step.template.version,
                "judge": self.judge.judge_id,
                "judge_options": dict(self.judge.fingerprint()),
            }
            rest = self._rest[which] = "," + stable_json(material)[1:]
        # a step may give the same text faster (it serialised parts once: TierStep.cache_text)
        cache_text = getattr(step, "cache_text", None)
        text = cache_text(batch) if cache_text else stable_json(step.cache_material(batch))
        return sha256_hex('{"input":' + text + rest)
