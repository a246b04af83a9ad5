"""The adapters' examples run as written, offline, with the embedded local:minilm judge, and
put the passage that answers the query first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize(
    ("script", "framework", "extra"),
    [
        ("langchain_rerank.py", "langchain_core", "langchain"),
        ("llamaindex_rerank.py", "llama_index.core", "llamaindex"),
    ],
)
def test_the_example_runs_offline_and_ranks_the_answer_first(
    script: str, framework: str, extra: str
) -> None:
    pytest.importorskip(framework, reason=f"pip install 'evidex[{extra}]'")
    out = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.splitlines()
    assert len(out) == 2  # top_k=2
    rank, score, source, text = out[0].split(" ", 3)
    assert (rank, source) == ("1", "nih") and "600 IU" in text
    assert 0.0 < float(score) <= 1.0
    assert out[1].startswith("2 ")
