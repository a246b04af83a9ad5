"""The README's examples run as written: tier and rerank with the real embedded judge, the
classify and audit snippets with a scripted judge standing in for their LLM (``openai:``,
``local:qwen``); the YAML tiers file loads as written."""

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
import yaml

import evidex
from evidex import judges
from evidex.judging import JudgeRequest
from tests.scripted import ScriptedJudge

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


def _first_block(marker: str) -> str:
    [block] = [b for b in _python_blocks() if marker in b]
    return block


def test_tier_and_rerank_snippets_run(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = [b for b in _python_blocks() if "evidex.tier(" in b and "passages = [\n" in b]
    blocks += [
        b
        for b in _python_blocks()
        if "evidex.rerank(" in b and "grounding" not in b and "sufficiency=check" not in b
    ]
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


def test_the_custom_tiers_file_loads_and_grades(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [text] = [b for b in re.findall(r"```yaml\n(.*?)```", README, re.DOTALL) if "tiers:" in b]
    assert "no answer" in yaml.safe_load(text)["tiers"][1]["definition"]  # not cut at a comma
    (tmp_path / "tiers.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "evidex.db"))
    namespace: dict[str, object] = {}
    exec(compile(_first_block("passages = [\n"), "README.md", "exec"), namespace)
    exec(
        compile(_first_block('TierScheme.from_file("tiers.yaml")'), "README.md", "exec"), namespace
    )
    scheme = namespace["scheme"]
    assert isinstance(scheme, evidex.TierScheme) and scheme.names == [
        "answer",
        "background",
        "noise",
    ]
    assert "'answer_count': 1" in capsys.readouterr().out


def _llm_stand_in(request: JudgeRequest) -> dict[str, object]:
    """Valid replies for the README's classify and two-pass audit examples."""
    if request.step == "classify":
        quote = "Orders not delivered within 30 days are refunded in full."
        evidence = {"passage_id": "r1", "quoted_text": quote, "rationale": "The refund rule."}
        label = {"label": "REFUND_ELIGIBLE", "confidence": 0.9, "supporting_evidence": [evidence]}
        return {
            "classifications": [{**label, "counter_evidence": []}],
            "unclassifiable": False,
            "unclassifiable_reason": None,
            "evidence_gaps": [],
        }
    if request.step == "audit.extract":
        return {"claims": ["Adults need 600 IU of vitamin D a day.", "Vitamin D also cures colds."]}
    grade = {
        "unsupported_part": None,
        "contradicted": False,
        "contradicting_quote": None,
        "explanation": "As the passage says.",
    }
    return {
        "claims": [
            {
                **grade,
                "claim_id": "claim-1",
                "classification": "fully_supported",
                "supporting_context_ids": ["p1"],
                "supporting_quotes": [
                    "Most adults need 600 IU (15 micrograms) of vitamin D a day."
                ],
            },
            {
                **grade,
                "claim_id": "claim-2",
                "classification": "unsupported",
                "supporting_context_ids": [],
                "supporting_quotes": [],
                "explanation": "No passage mentions colds.",
            },
        ]
    }


def test_the_classify_and_audit_snippets_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    built: list[ScriptedJudge] = []

    def factory(spec: str, **options: object) -> ScriptedJudge:
        built.append(ScriptedJudge([_llm_stand_in] * 10))
        return built[-1]

    judges.register_judge("openai", factory)
    judges.register_judge("local:qwen", factory)
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "evidex.db"))
    namespace: dict[str, object] = {}
    for marker in ("passages = [\n", "evidex.classify(", "answer_text = "):
        exec(compile(_first_block(marker), "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    quote = "Orders not delivered within 30 days are refunded in full."
    assert f"REFUND_ELIGIBLE 0.9 [('r1', '{quote}')]" in out
    assert "Vitamin D also cures colds. unsupported False" in out
    steps = [r.step for judge in built for r in judge.requests]
    assert steps == ["classify", "audit.extract", "audit.classify"]


def test_the_tracing_snippet_prints_nested_spans_as_written(tmp_path: Path) -> None:
    """Run in a fresh interpreter: the snippet sets the process's global tracer provider."""
    pytest.importorskip("opentelemetry.sdk.trace")
    code = _first_block("passages = [\n") + "\n" + _first_block("ConsoleSpanExporter")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "EVIDEX_DB": str(tmp_path / "evidex.db")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for name in ("evidex.job tier", "evidex.step tier", "score minilm"):
        assert f'"name": "{name}"' in done.stdout, name
    assert '"gen_ai.request.model": "minilm"' in done.stdout
    assert '"evidex.cache_hit": false' in done.stdout


def test_the_price_table_snippets_load_and_price_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The TOML table loads as the config file; the Python one prices a run (a scripted judge
    stands in for ``openai:gpt-4o-mini``: 100 tokens in, 20 out)."""
    from evidex.config import load_settings
    from evidex.pricing import Price
    from tests.scripted import tier_reply

    [toml] = [b for b in re.findall(r"```toml\n(.*?)```", README, re.DOTALL) if "[prices]" in b]
    (tmp_path / "config.toml").write_text(toml)
    monkeypatch.setenv("EVIDEX_CONFIG", str(tmp_path / "config.toml"))
    assert load_settings().prices == {"openai:gpt-4o-mini": Price(input=0.15, output=0.60)}

    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))

    def factory(spec: str, **options: object) -> ScriptedJudge:
        judge = ScriptedJudge([tier_reply])
        judge.judge_id = spec
        return judge

    judges.register_judge("openai", factory)
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "evidex.db"))
    namespace: dict[str, object] = {}
    for marker in ("passages = [\n", "from evidex.pricing import Price"):
        exec(compile(_first_block(marker), "README.md", "exec"), namespace)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f"1 1 100 {(100 * 0.15 + 20 * 0.60) / 1e6}"


def test_the_grounding_and_custom_prompt_snippets_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the embedded judge, after the tier snippet that defines ``passages``."""
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "evidex.db"))
    namespace: dict[str, object] = {}
    for marker in ("passages = [\n", "check_grounding=True", "evidex.Prompt("):
        exec(compile(_first_block(marker), "README.md", "exec"), namespace)
    grounding = namespace["g"]
    assert grounding.answered is True and grounding.supporting == ["p1"]  # type: ignore[attr-defined]
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-2].startswith("True ['p1'] 1 of the top 2 passages directly support")
    assert out[-1] == namespace["custom"].prompt_version  # type: ignore[attr-defined]
    passages: Any = namespace["passages"]
    default = evidex.tier("How much vitamin D do adults need?", passages)
    assert out[-1] != default.prompt_version


def test_the_custom_prompt_command_runs_as_written(tmp_path: Path) -> None:
    [command] = [c for c in _cli_commands() if c.startswith("evidex tier --prompt examples/")]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    script = Path(sys.executable).with_name("evidex")
    line = command.replace("evidex", shlex.quote(str(script)), 1)
    env = {**os.environ, "EVIDEX_DB": str(tmp_path / "evidex.db")}
    done = subprocess.run(
        ["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    from evidex.tasks.tier import TIER_TEMPLATE

    assert json.loads(done.stdout)["prompt_version"] != TIER_TEMPLATE.version


def test_the_pipeline_snippets_run_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("langchain_core", reason="pip install 'evidex[langchain]'")
    pytest.importorskip("llama_index.core", reason="pip install 'evidex[llamaindex]'")
    namespace: dict[str, object] = {}
    for marker in ("evidex.integrations.langchain", "evidex.integrations.llamaindex"):
        exec(compile(_first_block(marker), "README.md", "exec"), namespace)
    out = capsys.readouterr().out.strip().splitlines()
    # LangChain: the answer first, metadata kept; strict tiers keep the answer alone
    assert out[0] == "1 nih.md Most adults need 600 IU of vitamin D a day."
    assert out[1].startswith("2 ") and len(out) == 5
    assert out[2] == "[('nih.md', 'directly-supporting')]"
    # LlamaIndex: the judge's score on the node, best first
    score, source, _ = out[3].split(" ", 2)
    assert source == "nih.md" and float(score) > float(out[4].split(" ", 1)[0])


def _chain_stand_in(sufficient: bool) -> Any:
    """Valid sufficiency and two-pass audit replies for the README's chain: the passages
    suffice (the one with the dose is quoted) or they do not."""
    dose = "Most adults need 600 IU (15 micrograms) of vitamin D a day."
    answer = "Most adults need 600 IU of vitamin D a day."

    def reply(request: JudgeRequest) -> dict[str, object]:
        if request.step == "sufficiency":
            ids = [p.passage_id for p in request.payload.passages]  # type: ignore[attr-defined]
            if not sufficient:
                return {
                    "sufficient": False,
                    "confidence": 0.9,
                    "supporting_passage_ids": [],
                    "key_quotes": [],
                    "missing": ["the daily dose for adults"],
                }
            assert "p1" in ids, ids
            return {
                "sufficient": True,
                "confidence": 0.9,
                "supporting_passage_ids": ["p1"],
                "key_quotes": [{"passage_id": "p1", "quoted_text": dose}],
                "missing": [],
            }
        if request.step == "audit.extract":
            return {"claims": [answer]}
        return {
            "claims": [
                {
                    "claim_id": "claim-1",
                    "classification": "fully_supported",
                    "supporting_context_ids": ["p1"],
                    "supporting_quotes": [dose],
                    "unsupported_part": None,
                    "contradicted": False,
                    "contradicting_quote": None,
                    "explanation": "As the passage says.",
                }
            ]
        }

    return reply


@pytest.mark.parametrize("sufficient", [True, False])
def test_the_chain_snippet_answers_or_abstains_as_written(
    sufficient: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """rerank and tier with the embedded judge, sufficiency and audit with a scripted judge
    standing in for ``local:qwen``: generated and audited when the passages suffice, no
    context and the reasons when they do not (the real model: tests/test_readme_embedded.py)."""
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    built: list[ScriptedJudge] = []

    def factory(spec: str, **options: object) -> ScriptedJudge:
        built.append(ScriptedJudge([_chain_stand_in(sufficient)] * 10))
        return built[-1]

    judges.register_judge("local:qwen", factory)
    monkeypatch.setenv("EVIDEX_DB", str(tmp_path / "evidex.db"))
    namespace: dict[str, object] = {}
    for marker in ("passages = [\n", "sufficiency=check"):
        exec(compile(_first_block(marker), "README.md", "exec"), namespace)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    steps = [r.step for judge in built for r in judge.requests]
    if sufficient:
        assert last.startswith("answer: Most adults need 600 IU of vitamin D a day.")
        assert "publish" in last
        assert steps == ["sufficiency", "audit.extract", "audit.classify"]
    else:
        assert last.startswith("abstain ") and "the daily dose for adults" in last
        assert steps == ["sufficiency"]  # nothing generated, nothing audited


def test_the_run_comparison_and_baseline_gate_run_as_written(tmp_path: Path) -> None:
    """Two runs over the example golden set (predictions kept from a last release, and the
    embedded judge today), compared item by item, and gated against the pinned one."""
    commands = [c for c in _cli_commands() if "examples/eval/" in c or "eval compare" in c]
    assert [c.split(" -")[0] for c in commands] == [
        "evidex eval tier",
        "evidex eval tier",
        "evidex eval compare runs/last-release runs/today",
        "evidex gate",
    ]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    script = Path(sys.executable).with_name("evidex")
    env = {**os.environ, "EVIDEX_DB": str(tmp_path / "evidex.db"), "COLUMNS": "120"}
    outputs = []
    for command in commands:
        line = command.replace("evidex", shlex.quote(str(script)), 1)
        done = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    page = (tmp_path / "compare.md").read_text(encoding="utf-8")
    assert "| `accuracy` |" in page and "## Changed judgments: 3 of 17 pairs" in page
    assert "- **`k8s-grace / grace-field`** (golden: directly-supporting): worse" in page
    assert "against the baseline (paired bootstrap over pairs)" in outputs[-1]
    assert "FAIL" not in outputs[-1]


def test_the_mcp_examples_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The Python client lists the tools and grades with the embedded judge; the client
    configuration starts a server that lists the same tools. The SDK hands a server HOME and
    PATH only: HOME is the test's, so nothing reaches the user's data or config."""
    pytest.importorskip("mcp")
    import asyncio

    from mcp import Client, StdioServerParameters

    assert {"evidex mcp", "evidex serve --mcp"} <= set(_cli_commands())
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    namespace: dict[str, object] = {}
    exec(compile(_first_block("StdioServerParameters"), "README.md", "exec"), namespace)
    # capfd: the SDK hands the server process the file descriptor of stderr
    names, summary = capfd.readouterr().out.strip().splitlines()
    from evidex.jobs import job_names

    tools = [*job_names(), "review_list", "review_show"]
    assert names == repr(tools)
    assert summary.startswith("tier: query=vitamin D dose; classifications: 1; tier_summary: ")
    [config] = [
        json.loads(b) for b in re.findall(r"```json\n(.*?)```", README, re.DOTALL) if "mcp" in b
    ]
    server = config["mcpServers"]["evidex"]
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"]
    )

    async def listed() -> list[str]:
        async with Client(params) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert asyncio.run(listed()) == tools
