"""Judges are chosen by spec string: unknown specs, missing models and misspelled options are
usage errors that say what to write instead; nothing is guessed, nothing is ignored."""

from __future__ import annotations

import pytest

from evidex.errors import ConfigError, UnknownJudgeError
from evidex.jobs._common import resolve_judge
from evidex.judges import get_judge
from evidex.judges._openai import PLACEHOLDER_KEY, OpenAIJudge

LOCAL = "http://127.0.0.1:11434/v1"


@pytest.mark.parametrize("spec", ["nope", "nope:model", "anthropic:claude", "openai", "local:gpt"])
def test_unknown_spec_lists_the_known_ones(spec: str) -> None:
    with pytest.raises(UnknownJudgeError) as caught:
        get_judge(spec)
    message = str(caught.value)
    assert repr(spec) in message
    assert "openai:MODEL" in message and "local:minilm" in message


@pytest.mark.parametrize("spec", ["openai:", "openai:   "])
def test_openai_without_a_model_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="names no model: write openai:MODEL"):
        get_judge(spec, base_url=LOCAL)


def test_misspelled_option_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        get_judge("openai:llama3", base_ur=LOCAL)
    message = str(caught.value)
    assert "unknown option 'base_ur'" in message
    assert "base_url" in message  # the known options are listed


def test_bad_option_value_is_named_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        get_judge("openai:llama3", base_url=LOCAL, structured_output="xml", api_key=12345)
    message = str(caught.value)
    assert "option 'structured_output'" in message and "option 'api_key'" in message
    assert "12345" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_openai_without_a_key_is_a_config_error_with_a_hint() -> None:
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY or pass api_key"):
        get_judge("openai:gpt-4o-mini")


def test_local_server_without_a_key_gets_the_placeholder() -> None:
    judge = get_judge("openai:llama3", base_url=LOCAL)
    assert isinstance(judge, OpenAIJudge)
    assert judge._api_key.get_secret_value() == PLACEHOLDER_KEY


def test_base_url_and_key_come_from_options_then_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://generic:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    generic = get_judge("openai:m")
    assert isinstance(generic, OpenAIJudge)
    assert generic.base_url == "http://generic:8000/v1"
    monkeypatch.setenv("EVIDEX_OPENAI_BASE_URL", "http://ours:8000/v1/")
    judge = get_judge("openai:m")
    assert isinstance(judge, OpenAIJudge)
    assert judge.base_url == "http://ours:8000/v1"
    assert judge._api_key.get_secret_value() == "sk-from-env"
    judge = get_judge("openai:m", base_url="http://option:1/v1", api_key="sk-option")
    assert isinstance(judge, OpenAIJudge)
    assert judge.base_url == "http://option:1/v1"
    assert judge._api_key.get_secret_value() == "sk-option"


def test_base_url_must_be_http() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        get_judge("openai:m", base_url="localhost:11434")


def test_fingerprint_and_identity_hold_no_credentials() -> None:
    judge = get_judge(
        "openai:gpt-4o-mini",
        base_url="https://user:hunter2@proxy.example.com:8443/v1?key=sk-in-query",
        api_key="sk-test-SECRET123",
        structured_output="json_object",
    )
    assert judge.judge_id == "openai:gpt-4o-mini"
    assert dict(judge.fingerprint()) == {"model": "gpt-4o-mini", "structured_output": "json_object"}
    assert "https://proxy.example.com:8443/v1" in repr(judge)
    for text in (judge.judge_id, repr(judge), str(judge.fingerprint())):
        assert "hunter2" not in text and "sk-" not in text


def test_fingerprint_changes_with_what_changes_judgments() -> None:
    base = get_judge("openai:m", base_url=LOCAL).fingerprint()
    assert get_judge("openai:m2", base_url=LOCAL).fingerprint() != base
    assert get_judge("openai:m", deployment="vllm-awq", base_url=LOCAL).fingerprint() != base
    # the server is not what judges: another replica of the same model keeps the cache
    assert get_judge("openai:m", base_url="http://other:1/v1").fingerprint() == base
    assert get_judge("openai:m", base_url=LOCAL, structured_output="none").fingerprint() != base
    assert get_judge("openai:m", base_url=LOCAL, timeout_s=5).fingerprint() == base


@pytest.mark.parametrize("job", ["tier", "rerank", "classify", "audit"])
def test_openai_judge_does_every_job(job: str) -> None:
    assert resolve_judge("openai:m", job, base_url=LOCAL).supports(job)
