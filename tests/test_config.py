"""Settings precedence: explicit arguments > environment > config file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidex.config import load_settings
from evidex.errors import ConfigError
from evidex.jobs._common import resolve_judge
from evidex.judges import register_judge
from tests.scripted import ScriptedJudge


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.toml"
    path.write_text('timeout_s = 30\nmax_concurrency = 2\n[judges]\ntier = "openai:from-file"\n')
    monkeypatch.setenv("EVIDEX_CONFIG", str(path))
    settings = load_settings()
    assert settings.timeout_s == 30 and settings.judges["tier"] == "openai:from-file"
    assert settings.judges["audit"] == "local:qwen"  # untouched default
    monkeypatch.setenv("EVIDEX_TIMEOUT_S", "45")
    monkeypatch.setenv("EVIDEX_JUDGE_TIER", "openai:from-env")
    settings = load_settings()
    assert settings.timeout_s == 45 and settings.judges["tier"] == "openai:from-env"
    assert settings.max_concurrency == 2
    assert load_settings(timeout_s=5, max_concurrency=None).timeout_s == 5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("colour = 1", "invalid settings"),
        ("[judges]\nsummarise = 'x'", "unknown job"),
        ("timeout_s = ", "cannot read"),
        ("timeout_s = -1", "invalid settings"),
    ],
)
def test_bad_files_are_config_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, message: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(content)
    monkeypatch.setenv("EVIDEX_CONFIG", str(path))
    with pytest.raises(ConfigError, match=message):
        load_settings()


def test_missing_named_file_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVIDEX_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings()


def test_default_judge_follows_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("EVIDEX_CONFIG", raising=False)
    register_judge("scripted-config", lambda spec, **_: ScriptedJudge())
    monkeypatch.setenv("EVIDEX_JUDGE_RERANK", "scripted-config")
    assert resolve_judge(None, "rerank").judge_id == "scripted"


def test_a_harness_built_without_settings_uses_the_configured_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidex.harness.runner import Harness
    from evidex.store import open_store

    monkeypatch.setenv("EVIDEX_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text("max_concurrency = 3\n")
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    judge = ScriptedJudge([])

    unset = Harness(judge, store).settings
    assert unset.timeout_s is None and unset.max_concurrency == 3  # None: the judge's default

    monkeypatch.setenv("EVIDEX_TIMEOUT_S", "7.5")
    configured = Harness(judge, store).settings
    assert configured.timeout_s == 7.5 and configured.max_concurrency == 3
    store.close()
