"""The sufficiency job's step in ``evidex demo``: before the answer is generated, is the
selected context enough? One question it answers and one it does not, beside the author's
labels (``steps.sufficiency`` in the bundled example)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evidex.jobs._demo import DemoCase, DemoInputs, DemoPart
from evidex.judging import Judge

__all__ = ["SUFFICIENCY_DEMO"]


def _check(inputs: DemoInputs, judge: Judge, keywords: Mapping[str, Any]) -> list[DemoCase]:
    from evidex.jobs.sufficiency import sufficiency

    cases = []
    for case in inputs.section.get("cases", []):
        query = case.get("query") or inputs.query
        result = sufficiency(query, list(inputs.context), judge=judge, **keywords)
        judged = "sufficient" if result.sufficient else "insufficient"
        reason = result.decision.reasons[0].message
        cases.append(
            DemoCase(
                case=query,
                expected=case["expected"],
                judged=judged,
                agrees=judged == case["expected"],
                detail=f"{result.decision.decision.upper()} ({result.confidence:.2f}): {reason}",
                source=result.source,
                report=result.report(),
            )
        )
    return cases


SUFFICIENCY_DEMO = DemoPart(
    title="Enough to answer? (checked before generating)",
    judge="local:qwen",
    run=_check,
)
