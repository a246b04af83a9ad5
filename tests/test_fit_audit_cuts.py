"""``bench/fit_audit_cuts.py``: the cut points it picks are those the real scorer does best with.

The fit replays fixed probabilities through :class:`AuditScorer`, so the word-coverage
downgrade is part of what is fitted. Here the model's P(Yes) alone cannot tell the supported
claims from the rest (one partially supported claim has the highest), while the quotes'
coverage of the claim words can: only a fit that goes through the scorer finds F1 1.0.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from evidex.judges._claim_evidence import Evidence

_BENCH = Path(__file__).resolve().parent.parent / "bench"


def _fit_module() -> Any:
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))
    return importlib.import_module("fit_audit_cuts")


def _item(cid: str, label: str, claim: str) -> dict[str, Any]:
    return {"id": cid, "label": label, "claim": claim, "evidence": []}


def _probs(yes_all: float) -> dict[str, float]:
    return {
        "fully_supported": yes_all,
        "partially_supported": (1 - yes_all) * 0.5,
        "unsupported": (1 - yes_all) * 0.5,
    }


def test_the_fit_goes_through_the_scorer_and_its_coverage_downgrade() -> None:
    fit = _fit_module()
    quote = Evidence("passage-1", "The bridge opened in spring over the river.", 0, 43, 0.9)
    items = [
        _item("a", "supported", "The bridge opened in spring."),
        _item("b", "supported", "The bridge spans the river."),
        _item(
            "c",
            "partially_supported",
            "The bridge opened in spring, costing a fortune, designed by famous architects abroad.",
        ),
        _item("d", "not_supported", "Tigers hunt alone at night."),
    ]
    picks = {it["id"]: [quote] for it in items}
    probs = {"a": _probs(0.6), "b": _probs(0.55), "c": _probs(0.9), "d": _probs(0.1)}
    cuts, f1, _ = fit.fit(items, picks, probs)
    assert f1 == pytest.approx(1.0)
    assert 0.3 < cuts.coverage <= 0.75  # "c" has 3 of its 9 content words quoted
    assert fit.levels(items, picks, probs, cuts)[:2] == ["supported", "supported"]
    assert fit.levels(items, picks, probs, cuts)[2] == "partially_supported"
    # without the coverage cut the best F1 is lower: P(Yes) ranks "c" above both supported
    no_coverage = max(
        fit.label_f1(
            [it["label"] for it in items],
            fit.levels(items, picks, probs, fit.Cuts(supported=s, coverage=0.0)),
            "supported",
        ).f1
        for s in fit.GRID
    )
    assert no_coverage < 1.0
