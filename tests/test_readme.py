"""The README's tier and rerank examples run as written, with the real embedded judge.

(The classify and audit examples need an LLM judge; their commands are exercised with the
scripted judge in their own CLI tests.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def _cli_commands() -> list[str]:
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line.startswith("evidex "):
                commands.append(line)
    return commands


def test_tier_and_rerank_snippets_run(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = [b for b in _python_blocks() if "evidex.tier(" in b and "passages = [" in b]
    blocks += [b for b in _python_blocks() if "evidex.rerank(" in b]
    blocks += [b for b in _python_blocks() if "evidex.tier_many(" in b]
    assert len(blocks) == 3
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "p1 " in out and "p3 " in out
    assert "[('q1', '" in out and "('q2', '" in out  # the batch form, in input order


@pytest.mark.parametrize("name", ["tier", "rerank"])
def test_cli_examples_run_as_written(name: str, tmp_path: Path) -> None:
    [command] = [
        c for c in _cli_commands() if c.startswith(f"evidex {name} --query") and "examples/" in c
    ]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    script = Path(sys.executable).with_name("evidex")
    line = command.replace("evidex", shlex.quote(str(script)), 1)
    env = dict(os.environ)
    done = subprocess.run(
        ["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr


def test_the_bulk_example_runs_as_written_and_resumes(tmp_path: Path) -> None:
    [command] = [c for c in _cli_commands() if c.startswith("evidex bulk tier")]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    script = Path(sys.executable).with_name("evidex")
    line = command.replace("evidex", shlex.quote(str(script)), 1)
    env = {**os.environ, "EVIDEX_DB": str(tmp_path / "evidex.db")}
    for _ in range(2):  # the second run finds every id done
        done = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr
    ids = [json.loads(row)["id"] for row in (tmp_path / "graded.jsonl").read_text().splitlines()]
    tasks = (ROOT / "examples" / "bulk" / "tier.jsonl").read_text().splitlines()
    assert sorted(ids) == sorted(json.loads(t)["id"] for t in tasks)
    assert "skipped as already done" in done.stderr


def test_the_keys_examples_run_as_written(tmp_path: Path) -> None:
    commands = [c for c in _cli_commands() if c.startswith("evidex keys")]
    assert len(commands) == 3
    script = Path(sys.executable).with_name("evidex")
    env = {**os.environ, "EVIDEX_DB": str(tmp_path / "evidex.db")}
    outputs = []
    for command in commands:
        line = command.replace("evidex", shlex.quote(str(script)), 1)
        done = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    made = [out.strip().splitlines()[-1] for out in outputs[:2]]
    assert all(key.startswith("evx_") for key in made)
    assert "rag-api" in outputs[2] and "ana" in outputs[2]
    assert not any(key in outputs[2] for key in made)
