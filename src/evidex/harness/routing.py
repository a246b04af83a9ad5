"""What review routing shares across jobs. Each job's rules are small functions of its result
(:meth:`~evidex.harness.job.JobSpec.reviews`); the harness writes the items they raise."""

from __future__ import annotations

from evidex._text import sha256_hex

__all__ = ["sampled"]


def sampled(run_id: str, key: str, rate: float) -> bool:
    """Whether ``key`` falls in a ``rate`` sample of its run. Deterministic per run and key, so
    a re-run of the same run id routes the same items."""
    return int(sha256_hex(f"{run_id}:{key}")[:8], 16) / 0xFFFFFFFF < rate
