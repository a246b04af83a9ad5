from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evidex import judges
from evidex.store import SqlStore, open_store
from evidex.types import Passage
from tests.scripted import Reply, ScriptedJudge


@pytest.fixture(autouse=True)
def _isolated_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test writes to the user's data dir: the default store lives in the test's tmp dir."""
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "default.db"))
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "EVIDEX_OPENAI_BASE_URL",
        "EVIDEX_OPENAI_BASE_URLS",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    s = open_store(f"sqlite:///{tmp_path / 'evidex.db'}")
    yield s
    s.close()


@pytest.fixture
def passages() -> list[Passage]:
    texts = [
        "Vitamin D is made in the skin when it is exposed to sunlight.",
        "Most adults need 600 IU of vitamin D a day according to health agencies.",
        "The D-Day landings took place in Normandy in June 1944.",
        "Calcium and vitamin D work together to keep bones strong.",
        "A daily walk improves mood and cardiovascular health.",
        "Adults over 70 should take 800 IU of vitamin D daily.",
        "Vitamin D deficiency can cause rickets in children.",
    ]
    return [Passage(passage_id=f"p{i}", text=t) for i, t in enumerate(texts, 1)]


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[ScriptedJudge]]:
    """``install(*replies)`` registers the judge spec ``scripted``; each build gets the replies.

    Returns the list of judges built, to inspect the requests they saw. The registry is
    restored after the test.
    """
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    built: list[ScriptedJudge] = []

    def install(*replies: Reply) -> list[ScriptedJudge]:
        def factory(spec: str, **options: Any) -> ScriptedJudge:
            judge = ScriptedJudge(replies)
            built.append(judge)
            return judge

        judges.register_judge("scripted", factory)
        return built

    return install


@pytest.fixture(scope="session")
def qwen() -> Any:
    """The real embedded LLM judge (one model per process); skipped without the llm extra."""
    pytest.importorskip("llama_cpp", reason="the llm extra is not installed (llama-cpp-python)")
    from evidex.errors import MissingExtraError
    from evidex.judges._qwen import QwenJudge

    try:
        return QwenJudge()
    except MissingExtraError as exc:
        pytest.skip(f"the llm extra is incomplete: {exc}")
