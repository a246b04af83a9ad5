"""``local:gguf``: the user's own GGUF file, checked before llama.cpp sees it; the shipped Qwen
file through ``path=`` runs like ``local:qwen`` (slow, skipped without the ``llm`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evidex.errors import ConfigError
from evidex.judges import get_judge
from evidex.judges._gguf import GGUF_MAGIC, check_gguf


def test_a_missing_file_is_a_config_error_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(ConfigError, match=r"no file at .*nowhere/model\.gguf.*never downloaded"):
        get_judge("local:gguf", path=str(missing))


def test_a_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is a directory"):
        get_judge("local:gguf", path=str(tmp_path))


def test_a_file_that_is_not_gguf_is_a_config_error(tmp_path: Path) -> None:
    onnx = tmp_path / "model.gguf"
    onnx.write_bytes(b"\x08\x07\x12\x07pytorch" + bytes(100))
    with pytest.raises(ConfigError, match=r"model\.gguf is not a GGUF file"):
        get_judge("local:gguf", path=str(onnx))
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"empty\.gguf is not a GGUF file"):
        get_judge("local:gguf", path=str(empty))


def test_path_is_required_and_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'path'"):
        get_judge("local:gguf")
    fake = tmp_path / "m.gguf"
    fake.write_bytes(GGUF_MAGIC + bytes(16))
    with pytest.raises(ConfigError, match=r"'mode'"):
        get_judge("local:gguf", path=str(fake), mode="fast")
    with pytest.raises(ConfigError, match=r"'cache_dir'"):  # only local:qwen joins weights
        get_judge("local:gguf", path=str(fake), cache_dir=str(tmp_path))


def test_the_magic_bytes_are_enough_to_pass_the_check(tmp_path: Path) -> None:
    fake = tmp_path / "m.gguf"
    fake.write_bytes(GGUF_MAGIC + bytes(16))
    assert check_gguf(fake) == fake.resolve()


@pytest.mark.slow
def test_the_shipped_qwen_file_runs_through_path(qwen: Any, store: Any) -> None:
    from evidex.jobs.tier import tier
    from evidex.types import Passage

    path = qwen.model_path()
    judge = get_judge("local:gguf", path=str(path), mode="score")
    assert judge.model_version.startswith(f"gguf:{path.name}@cc324af070c2+llama-cpp-python-")
    assert judge.fingerprint()["model_version"] == judge.model_version
    assert judge._model() is qwen._model(), "one model per file and configuration"
    passages = [
        Passage(passage_id="a1", text="The Eiffel Tower is 330 metres tall."),
        Passage(passage_id="c3", text="Bananas are rich in potassium and easy to digest."),
    ]
    result = tier("How tall is the Eiffel Tower?", passages, judge=judge, store=store)
    assert [a.source for a in result.classifications] == ["judge", "judge"]
    assert result.classifications[0].tier == "directly-supporting"
    # the scoring primitive formats its prompt with the file's chat template too
    probs = judge.class_probabilities(
        [{"role": "user", "content": "Is the sky blue on a clear day? Answer Yes or No."}],
        ["Yes", "No"],
    )
    assert probs["Yes"] > 0.5
