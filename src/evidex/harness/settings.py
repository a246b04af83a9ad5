"""The settings of the harness: timeouts, concurrency, retries, splitting failed batches,
breaker, cache use and the price table a run's cost is estimated from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evidex.config import Settings
    from evidex.pricing import Price

__all__ = ["HarnessSettings"]


@dataclass(frozen=True)
class HarnessSettings:
    timeout_s: float | None = None
    """Seconds one judge call may take; None: the judge's own ``default_timeout_s`` (120 s, 900 s
    for ``local:qwen``; none for ``openai:``, which watches the progress of a streamed reply)."""
    max_concurrency: int = 4
    temperature: float = 0.2
    breaker_threshold: int = 5
    breaker_cooldown_s: float = 30.0
    backoff_s: float = 0.5
    max_retry_after_s: float = 60.0
    """A server's ``Retry-After`` is honoured up to this many seconds; a longer wait would hold
    the whole batch, so the attempt goes ahead at the cap (and the breaker counts failures)."""
    split_batches: bool = True
    """A batch whose replies still fail validation after the re-asks (or whose reply was cut off
    at its token limit) is split in halves and each half asked again, down to one item; only
    an item that fails alone takes the fallback (steps that grade items one by one: tier
    passages, audit claims)."""
    max_item_attempts: int = 8
    """Attempts one item may take part in, over its batch and every split part holding it: the
    batch's own ladder (3 for tier), one attempt for each smaller part, and two (the re-ask
    with the errors at temperature 0) when it is asked alone."""
    adapt_batch_size: bool = True
    """Send a judge whose batches keep failing smaller batches, and larger again as its replies
    validate (additive increase, multiplicative decrease between 5 and the job's batch size;
    :mod:`evidex.harness.sizing`), learnt within the process and read back from the audit log."""
    use_cache: bool = True
    tune_gc: bool = True
    """While runs are going, the garbage collector skips the objects that were there before the
    first of them and collects young objects less often (:mod:`evidex.harness.collector` says
    why and what it costs)."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """Judge spec → price per 1M tokens (:mod:`evidex.pricing`): a result's ``cost``; a judge
    not named here has none."""

    @classmethod
    def from_config(cls, configured: Settings | None = None) -> HarnessSettings:
        """Defaults with the configured ``timeout_s``, ``max_concurrency`` and ``prices`` (explicit
        argument > environment > config file; see :mod:`evidex.config`). A long-running caller
        (the HTTP service) passes the settings it loaded at start instead of re-reading them."""
        if configured is None:
            from evidex.config import load_settings

            configured = load_settings()
        return cls(
            timeout_s=configured.timeout_s,
            max_concurrency=configured.max_concurrency,
            split_batches=configured.split_batches,
            max_item_attempts=configured.max_item_attempts,
            adapt_batch_size=configured.adapt_batch_size,
            prices=configured.prices,
        )
