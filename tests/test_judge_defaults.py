"""Each job's registered judge options reach every surface that builds a judge from a spec.

``local:qwen`` audits, classifies and checks sufficiency in score mode (where it measures
best), and tiers in its own default, ``generate``: the library call, ``evidex JOB``, ``evidex
bulk JOB``, the service and the demo all build it that way, an option the caller gives wins, and
the judge's model version (in every audit-log row) names the mode. Here a recording factory
stands in for ``local:qwen`` (it notes the options, then declines the job, so nothing runs);
``tests/test_readme.py`` runs the real model on the README's snippets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

import evidex
from evidex import judges
from evidex.cli import main
from evidex.errors import ConfigError
from evidex.jobs import judge_defaults, judge_key, resolve_judge
from tests.scripted import ScriptedJudge

PASSAGES = [{"passage_id": "a", "text": "Most adults need 600 IU of vitamin D a day."}]


class _Declines(ScriptedJudge):
    """A judge that can do no job: built, its options noted, then refused by the job."""

    jobs: ClassVar[frozenset[str]] = frozenset()
    reads_prompts: ClassVar[bool] = False


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The options of every ``local:qwen`` judge built during the test."""
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    seen: list[dict[str, Any]] = []

    def factory(spec: str, **options: Any) -> ScriptedJudge:
        seen.append(options)
        judge = _Declines()
        judge.judge_id = spec
        return judge

    judges.register_judge("local:qwen", factory)
    return seen


SCORE = {"mode": "score"}


def test_the_registry_names_score_mode_for_the_jobs_that_measure_best_with_it() -> None:
    for job in ("audit", "classify", "sufficiency"):
        assert judge_defaults(job, "local:qwen") == SCORE
        assert judge_defaults(job, " local:qwen ") == SCORE
    for job in ("tier", "rerank"):
        assert judge_defaults(job, "local:qwen") == {}
    assert judge_defaults("audit", "openai:gpt-4o-mini") == {}
    assert judge_key("audit", "local:qwen") == judge_key("classify", "local:qwen")
    assert judge_key("audit", "local:qwen") != judge_key("tier", "local:qwen")


def test_the_library_call_builds_the_jobs_mode_and_a_given_option_wins(
    built: list[dict[str, Any]],
) -> None:
    with pytest.raises(ConfigError, match="cannot do the audit job"):
        evidex.audit("Adults need 600 IU a day.", PASSAGES)  # the default judge: local:qwen
    with pytest.raises(ConfigError):
        evidex.classify("My parcel never came.", PASSAGES, {"REFUND": "money back"})
    with pytest.raises(ConfigError):
        evidex.tier("vitamin D", PASSAGES, judge="local:qwen")
    with pytest.raises(ConfigError):
        resolve_judge("local:qwen", "audit", mode="generate", n_ctx=8192)
    assert built == [SCORE, SCORE, {}, {"mode": "generate", "n_ctx": 8192}]


def test_the_job_commands_and_bulk_build_the_jobs_mode(
    built: list[dict[str, Any]], tmp_path: Path
) -> None:
    passages = tmp_path / "p.jsonl"
    passages.write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    answer = ["audit", "--answer", "Adults need 600 IU a day.", "--passages", str(passages)]
    assert main(answer) == 2
    assert main([*answer, "--judge-option", "mode=generate"]) == 2
    assert main(["sufficiency", "--query", "vitamin D", "--passages", str(passages)]) == 2
    assert main(["tier", "-q", "vitamin D", "-p", str(passages), "-j", "local:qwen"]) == 2
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": 1, "answer": "Adults need 600 IU.", "passages": PASSAGES}))
    out = tmp_path / "out.jsonl"
    assert main(["bulk", "audit", "--input", str(tasks), "--output", str(out)]) == 2
    assert built == [SCORE, {"mode": "generate"}, SCORE, {}, SCORE]


def test_the_service_builds_one_judge_per_spec_and_mode(
    built: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from evidex.service import create_app

    app = create_app("sqlite://", auth="off", allowed_hosts=["testserver"])
    answered = TestClient(app).post(
        "/audit", json={"answer": "Adults need 600 IU.", "passages": PASSAGES}
    )
    assert answered.status_code == 422 and "cannot do the audit job" in answered.text
    assert built == [SCORE]
    monkeypatch.setattr(_Declines, "reads_prompts", True)  # now it does every job
    judge_for = app.state.judge_for
    audit, classify, tier = (
        judge_for(None, "audit"),
        judge_for(None, "classify"),
        judge_for("local:qwen", "tier"),
    )
    assert audit is classify and tier is not audit  # one per spec and mode, shared
    assert judge_for(None, "sufficiency") is audit and judge_for("local:qwen", "rerank") is tier
    assert built == [SCORE, SCORE, {}]


def test_the_demo_builds_the_jobs_mode(built: list[dict[str, Any]]) -> None:
    from evidex.cli.demo import run_demo

    with pytest.raises(ConfigError, match="local:qwen cannot do the"):
        run_demo(store="sqlite://")  # the LLM steps' judge, built before any step runs
    assert built == [SCORE]


def test_the_model_version_names_the_mode(qwen: Any) -> None:
    """The mode is in the model version, which every audit-log row and the cache key carry."""
    from evidex.judges._qwen import QwenJudge, QwenOptions

    assert qwen.model_version.endswith("; mode=generate")
    scoring = QwenJudge(options=QwenOptions(mode="score"))
    assert scoring.model_version.endswith("; mode=score")
    built = resolve_judge(None, "audit")
    assert isinstance(built, QwenJudge) and built.model_version.endswith("; mode=score")
    assert resolve_judge("local:qwen", "tier").model_version.endswith("; mode=generate")
