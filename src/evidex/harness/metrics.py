"""Process-wide metrics fed by the harness hooks: judge calls by status, fallbacks, review
items, cache hits, latency, tokens, the rerank grounding check's outcomes and the passages
preflight flagged as suspected injections. The HTTP service exports them for Prometheus;
library users read :func:`metrics` directly."""

from __future__ import annotations

import threading
from collections import Counter, deque
from statistics import median
from typing import Any

from evidex.harness.events import AuditRecord

__all__ = ["Metrics", "grounding_outcome", "metrics", "suspected_injection_kind"]


def grounding_outcome(record: AuditRecord) -> str | None:
    """``answered``, ``not_answered`` or ``fallback`` for a rerank run's metrics note that
    carries a grounding check; None for any other record."""
    if record.step != "rerank_metrics" or record.detail.get("grounding_answered") is None:
        return None
    if record.detail.get("grounding_source") == "fallback":
        return "fallback"
    return "answered" if record.detail["grounding_answered"] else "not_answered"


def suspected_injection_kind(record: AuditRecord) -> str | None:
    """The suspicion kind (``role_tokens``, ``query_stuffing``...) of a preflight note that
    flags a passage as a suspected injection; None for any other record."""
    if record.status != "note" or record.step != "suspected_injection":
        return None
    return str(record.detail.get("suspicion") or "unknown")


class Metrics:
    def __init__(self, window: int = 1000) -> None:
        self._lock = threading.Lock()
        self.records: Counter[tuple[str, str, str]] = Counter()
        self.tokens: Counter[tuple[str, str]] = Counter()
        self.latency_ms: dict[str, deque[float]] = {}
        self.grounding: Counter[str] = Counter()
        self.suspected: Counter[tuple[str, str]] = Counter()
        """(job, suspicion kind) -> suspected_injection notes (one per suspicion found)."""
        self.batch_size: dict[tuple[str, str], int] = {}
        """(job, judge) -> the size of its latest batch whose reply validated (steps that grade
        items one by one), which the harness adapts to the judge (:mod:`evidex.harness.sizing`)."""
        self._window = window
        self._listeners: list[Any] = []

    def observe(self, record: AuditRecord) -> None:
        with self._lock:
            self.records[(record.job, record.status, record.judge_id)] += 1
            self.tokens[(record.job, "prompt")] += record.prompt_tokens
            self.tokens[(record.job, "completion")] += record.completion_tokens
            if record.latency_ms is not None:
                self.latency_ms.setdefault(record.job, deque(maxlen=self._window)).append(
                    record.latency_ms
                )
            outcome = grounding_outcome(record)
            if outcome is not None:
                self.grounding[outcome] += 1
            if record.status == "ok" and "items" in record.detail:
                self.batch_size[(record.job, record.judge_id)] = int(record.detail["items"])
            suspicion = suspected_injection_kind(record)
            if suspicion is not None:
                self.suspected[(record.job, suspicion)] += 1
        for listener in self._listeners:
            listener(record)

    def add_listener(self, fn: Any) -> None:
        """Forward every record to ``fn`` too (the service's Prometheus collectors)."""
        self._listeners.append(fn)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "records": [
                    {"job": j, "status": s, "judge": judge, "count": n}
                    for (j, s, judge), n in sorted(self.records.items())
                ],
                "tokens": {f"{j}.{kind}": n for (j, kind), n in sorted(self.tokens.items())},
                "latency_ms_median": {
                    j: round(median(v), 2) for j, v in sorted(self.latency_ms.items()) if v
                },
                "rerank_grounding": dict(sorted(self.grounding.items())),
                "batch_size": [
                    {"job": j, "judge": judge, "size": n}
                    for (j, judge), n in sorted(self.batch_size.items())
                ],
                "suspected_injection": [
                    {"job": j, "kind": k, "count": n}
                    for (j, k), n in sorted(self.suspected.items())
                ],
            }


_METRICS = Metrics()


def metrics() -> Metrics:
    """The process-wide collector every harness reports to."""
    return _METRICS
