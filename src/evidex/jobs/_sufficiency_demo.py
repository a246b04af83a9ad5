"""The sufficiency job's step in ``evidex demo``: before the answer is generated, is the
selected context enough? One question it answers and one it does not, beside the author's
labels (``steps.sufficiency`` in the bundled example)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from evidex.jobs._common import run_sync
from evidex.jobs._demo import DemoCase, DemoInputs, DemoPart
from evidex.judging import Judge

__all__ = ["demo_part"]

Check = Callable[..., Coroutine[Any, Any, Any]]
"""``asufficiency(query, passages, **options)``."""


def demo_part(check: Check) -> DemoPart:
    """The demo step, checking each case with ``check`` (the job's library call)."""

    def run(inputs: DemoInputs, judge: Judge, keywords: Mapping[str, Any]) -> list[DemoCase]:
        cases = []
        for case in inputs.section.get("cases", []):
            query = case.get("query") or inputs.query
            result: Any = run_sync(check(query, list(inputs.context), judge=judge, **keywords))
            judged = "sufficient" if result.sufficient else "insufficient"
            reason = result.decision.reasons[0].message
            cases.append(
                DemoCase(
                    case=query,
                    expected=case["expected"],
                    judged=judged,
                    agrees=judged == case["expected"],
                    detail=f"{result.decision.decision.upper()} ({result.confidence:.2f}): "
                    f"{reason}",
                    source=result.source,
                    report=result.report(),
                )
            )
        return cases

    return DemoPart(
        title="Enough to answer? (checked before generating)",
        judge="local:qwen",
        run=run,
    )
