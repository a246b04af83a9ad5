"""The README's classify, audit and sufficiency examples, run as written with the embedded judge
they name (``local:qwen``, in the score mode these jobs register), give the results the README
describes. Slow: the real model (one llama.cpp thread is enough, ``EVIDEX_QWEN_THREADS=1``);
``tests/test_readme.py`` runs the same snippets fast with a scripted judge standing in.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_readme import README, ROOT, _cli_commands, _first_block, _python_blocks

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _embedded(qwen: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real model is there (else the test is skipped, naming the missing extra)."""
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "evidex.db"))
    monkeypatch.delenv("EVIDEX_JUDGE_CLASSIFY", raising=False)
    monkeypatch.delenv("EVIDEX_JUDGE_AUDIT", raising=False)


def _snippets(*markers: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    for marker in ("passages = [\n", *markers):
        exec(compile(_first_block(marker), "README.md", "exec"), namespace)
    return namespace


def test_the_classify_snippet_gives_the_label_it_describes() -> None:
    result = _snippets("evidex.classify(")["result"]
    assert "judge=" not in _first_block("evidex.classify(").split("#")[0]  # the default judge
    assert result.source == "judge" and result.judge_id == "local:qwen"
    [label] = result.classifications
    assert label.label == "REFUND_ELIGIBLE"
    assert 0.5 <= label.confidence < 0.7  # "about 0.6", "under the threshold"
    assert label.supporting_evidence[0].passage_id == "r1"
    assert [r.label for r in result.review] == ["REFUND_ELIGIBLE"]
    assert "below the threshold 0.7" in result.review[0].reason
    assert "REFUND_ELIGIBLE` at a confidence of about 0.6" in README


def test_the_audit_snippet_grades_as_it_describes() -> None:
    result = _snippets("answer_text = ")["result"]
    grades = {c.claim_text: c.classification for c in result.claims}
    assert grades == {
        "Adults need 600 IU of vitamin D a day.": "fully_supported",
        "Vitamin D also cures colds.": "unsupported",
    }
    first = result.claims[0]
    assert first.supporting_context_ids[0] == "p1" and not first.contradicted
    assert result.decision.decision == "review" and result.source == "judge"
    codes = {r.code for r in result.decision.reasons}
    assert codes == {"unsupported_ratio", "high_risk_signoff"}
    assert "local:qwen" in result.judge_id


def test_the_sufficiency_and_chain_snippets_answer_as_they_describe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    namespace = _snippets('check = sufficiency("How much')
    check = namespace["check"]
    assert check.sufficient and check.missing == [] and check.source == "judge"
    assert 0.6 <= check.confidence <= 0.9  # "about 0.75"
    assert check.decision.decision == "answer"
    capsys.readouterr()
    _snippets("sufficiency=check")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("answer: Most adults need 600 IU of vitamin D a day.")
    assert "decision='publish'" in last


def test_the_classify_and_audit_command_lines_give_what_the_readme_says(tmp_path: Path) -> None:
    """``evidex classify`` and ``evidex audit`` of the CLI section, on the example files."""
    lines = [c for c in _cli_commands() if c.startswith(("evidex classify", "evidex audit"))]
    assert len(lines) == 2
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    script = Path(sys.executable).with_name("evidex")
    results = []
    for line in lines:
        done = subprocess.run(
            ["bash", "-c", line.replace("evidex", shlex.quote(str(script)), 1)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "EVIDEX_DB": str(tmp_path / "cli.db")},
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout))
    classified, audited = results
    [label] = classified["classifications"]
    assert label["label"] == "REFUND_ELIGIBLE" and 0.4 <= label["confidence"] < 0.7
    assert classified["source"] == "judge" and len(classified["review"]) == 1
    assert audited["source"] == "judge" and len(audited["claims"]) == 4
    assert audited["decision"]["decision"] == "publish"
    unsupported = [
        c["claim_text"] for c in audited["claims"] if c["classification"] == "unsupported"
    ]
    assert unsupported == ["The grace period can never be longer than five minutes."]
    assert re.search(r"the audit line grades the four sentences", README)


def test_the_test_suite_example_runs_as_written(tmp_path: Path) -> None:
    """The example suite with the judges it names (``local:minilm`` for tier and rerank,
    ``local:qwen`` for audit): the README's failure message is the run's, and a second run is
    answered by the store's cache."""
    [suite] = [b for b in _python_blocks() if "from evidex.testing import" in b]
    [text] = [b for b in re.findall(r"```text\n(.*?)```", README, re.DOTALL) if "evidex:" in b]
    [command] = [
        line.split("  #", 1)[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
        for line in block.splitlines()
        if line.startswith("pytest test_answers.py")
    ]
    (tmp_path / "test_answers.py").write_text(suite, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    argv = [sys.executable, "-m", *shlex.split(command), "-p", "no:cacheprovider"]
    runs = [
        subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
        for _ in range(2)
    ]
    first = runs[0].stdout
    assert runs[0].returncode == 1 and "1 failed, 1 passed" in first, first
    for line in text.strip().splitlines():
        pattern = re.escape(line).replace(re.escape("..."), ".*")
        assert re.search(pattern, first), (line, first)
    assert "evidex: 3 checks (1 failed), 0 judge calls, 3 answered from the cache" in runs[1].stdout
