"""What the adapter tests share: a query, four retrieved texts with their metadata, and
scripted judges that rank or tier them in a known way."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from evidex.errors import MissingExtraError
from evidex.judging import JudgeRequest
from tests.scripted import ScriptedJudge, rank_reply, tier_reply

QUERY = "How much vitamin D do adults need?"
TEXTS = [
    "Vitamin D is made in the skin when it is exposed to sunlight.",
    "Most adults need 600 IU of vitamin D a day.",
    "The D-Day landings took place in Normandy in June 1944.",
    "Calcium and vitamin D work together to keep bones strong.",
]
METADATA = [{"source": f"kb/doc{i}.md", "page": i} for i in range(len(TEXTS))]
TIERS = {
    "passage-1": "contextually-relevant",
    "passage-2": "directly-supporting",
    "passage-3": "irrelevant",
    "passage-4": "contextually-relevant",
}
"""The tier each text gets from :func:`tier_judge`."""


def rank_judge(order: tuple[str, ...] = ("passage-2", "passage-4")) -> ScriptedJudge:
    """Ranks ``order`` first, then the others in reverse (see ``rank_reply``)."""
    return ScriptedJudge([rank_reply(list(order))])


def tier_judge() -> ScriptedJudge:
    """Grades each text by :data:`TIERS`."""

    def reply(request: JudgeRequest) -> dict[str, Any]:
        overrides = {pid: {"tier": tier} for pid, tier in TIERS.items()}
        overrides["passage-3"]["key_evidence_snippet"] = None
        return tier_reply(request, **overrides)

    return ScriptedJudge([reply])


def broken_judge() -> ScriptedJudge:
    """Never answers in valid JSON: every attempt fails, the job falls back."""
    return ScriptedJudge(["not json"] * 10)


def assert_missing_extra(monkeypatch: pytest.MonkeyPatch, module: str, framework: str) -> None:
    """Importing ``module`` without ``framework`` says which extra to install."""
    import importlib

    extra = module.rsplit(".", 1)[1]
    monkeypatch.setitem(sys.modules, framework, None)  # makes `import framework` fail
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingExtraError, match=rf"pip install 'evidex\[{extra}\]'"):
        importlib.import_module(module)
