"""Your own prompts: a prompt file per job, checked on load against the step's placeholders,
used by the library (``prompt=`` and the ``prompts`` setting), with its own version in the
result, the audit log and the cache key."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evidex import Prompt, load_prompt
from evidex.errors import ConfigError
from evidex.harness.runner import HarnessSettings
from evidex.jobs.classify import classify
from evidex.jobs.rerank import rerank
from evidex.jobs.tier import tier
from evidex.judging import JudgeRequest
from evidex.store import SqlStore
from evidex.tasks.custom import BUILTIN_PROMPT
from evidex.tasks.rerank import RERANK_TEMPLATE
from evidex.tasks.tier import TIER_TEMPLATE
from evidex.types import Passage
from tests import classify_fixtures as cf
from tests.scripted import ScriptedJudge, rank_reply, tier_reply

FAST = HarnessSettings(backoff_s=0.0)
QUERY = "how much vitamin D do adults need?"

TIER_PROMPT = (
    "Grade each passage for a pharmacist checking dosing advice.\n"
    "Tiers:\n[TIER_DEFINITIONS]\n\nQuestion: [QUERY]\n\nPassages:\n[PASSAGES]\n"
)


def _user(request: JudgeRequest) -> str:
    return "\n".join(m.content for m in request.messages if m.role == "user")


def _tier(store: SqlStore, passages: Sequence[Passage], **kw: Any) -> tuple[Any, ScriptedJudge]:
    judge = ScriptedJudge([tier_reply])
    result = tier(QUERY, passages[:5], judge=judge, store=store, settings=FAST, **kw)
    return result, judge


# ---------------------------------------------------------------------------- loading


def test_a_text_file_is_the_user_message_and_yaml_has_system_and_user(tmp_path: Path) -> None:
    text = tmp_path / "tier.txt"
    text.write_text(TIER_PROMPT, encoding="utf-8")
    assert load_prompt(text) == Prompt(user=TIER_PROMPT, origin=str(text))

    both = tmp_path / "tier.yaml"
    both.write_text("system: You grade evidence.\nuser: |\n  Q: [QUERY]\n  P: [PASSAGES]\n")
    prompt = load_prompt(both)
    assert prompt.system == "You grade evidence." and prompt.user == "Q: [QUERY]\nP: [PASSAGES]\n"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.txt", "  \n", "the prompt file is empty"),
        ("typo.yaml", "user: '[QUERY] [PASSAGES]'\nsytem: x\n", "unknown key(s) ['sytem']"),
        ("list.yaml", "- a\n", "a YAML prompt file is a mapping"),
        ("missing.txt", None, "cannot read the prompt file"),
    ],
)
def test_unreadable_prompt_files_are_config_errors_naming_the_file(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_prompt(path)
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_a_missing_required_placeholder_names_file_placeholder_and_allowed(
    tmp_path: Path, store: SqlStore, passages: list[Passage]
) -> None:
    path = tmp_path / "no-passages.txt"
    path.write_text("Grade them for [QUERY].", encoding="utf-8")
    judge = ScriptedJudge([tier_reply])
    with pytest.raises(ConfigError) as caught:
        tier(QUERY, passages, judge=judge, store=store, prompt=path)
    message = str(caught.value)
    assert str(path) in message and "lacks the required placeholder [PASSAGES]" in message
    assert "[TIER_DEFINITIONS]" in message  # the allowed ones are listed
    assert judge.requests == []  # checked before any judge call


def test_an_unknown_placeholder_is_an_error_listing_the_allowed_ones(
    tmp_path: Path, store: SqlStore, passages: list[Passage]
) -> None:
    path = tmp_path / "typo.txt"
    path.write_text("[QUERY]\n[PASSAGES]\n[CONSTRAINT]", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        tier(QUERY, passages, judge=ScriptedJudge(), store=store, prompt=path)
    message = str(caught.value)
    assert "unknown placeholder [CONSTRAINT] for the tier prompt" in message
    for allowed in sorted(TIER_TEMPLATE.placeholders()):
        assert f"[{allowed}]" in message


# ---------------------------------------------------------------------------- the library


def test_tier_prompt_file_is_what_the_judge_reads_with_its_own_version(
    tmp_path: Path, store: SqlStore, passages: list[Passage]
) -> None:
    path = tmp_path / "tier.txt"
    path.write_text(TIER_PROMPT, encoding="utf-8")
    default, _ = _tier(store, passages)
    custom, judge = _tier(store, passages, prompt=path)

    user = _user(judge.requests[0])
    assert user.startswith("Grade each passage for a pharmacist checking dosing advice.")
    assert QUERY in user and '"passage_id": "p1"' in user and "- irrelevant:" in user
    assert custom.prompt_version != default.prompt_version
    assert (
        custom.prompt_version
        == _tier(store, passages, prompt=Prompt(TIER_PROMPT))[0].prompt_version
    )
    # the audit log files the exchange under the custom version
    rows = store.audit_rows(run_id=custom.run_id, step="tier")
    assert rows and {r["prompt_version"] for r in rows} == {custom.prompt_version}


def test_a_custom_prompt_has_its_own_cache_key(
    tmp_path: Path, store: SqlStore, passages: list[Passage]
) -> None:
    path = tmp_path / "tier.txt"
    path.write_text(TIER_PROMPT, encoding="utf-8")
    cached_default = _tier(store, passages)[0]
    assert _tier(store, passages)[0].classifications[0].source == "cache"

    custom, judge = _tier(store, passages, prompt=path)
    assert len(judge.requests) == 1  # not the default prompt's cached answer
    assert custom.classifications[0].source == "judge"
    again, judge = _tier(store, passages, prompt=path)
    assert judge.requests == [] and again.classifications[0].source == "cache"
    path.write_text(TIER_PROMPT + "Be brief.\n", encoding="utf-8")
    edited, judge = _tier(store, passages, prompt=path)
    assert len(judge.requests) == 1 and edited.prompt_version != custom.prompt_version
    assert cached_default.prompt_version == TIER_TEMPLATE.version


def test_the_prompts_setting_is_used_when_the_call_names_none(
    tmp_path: Path, store: SqlStore, passages: list[Passage], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tier.txt"
    path.write_text(TIER_PROMPT, encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text(f'[prompts]\ntier = "{path}"\n', encoding="utf-8")
    monkeypatch.setenv("EVIDEX_CONFIG", str(config))
    result, judge = _tier(store, passages)
    assert "pharmacist" in _user(judge.requests[0])
    assert result.prompt_version != TIER_TEMPLATE.version

    other = tmp_path / "env.txt"
    other.write_text("From the environment. [QUERY] [PASSAGES]", encoding="utf-8")
    monkeypatch.setenv("EVIDEX_PROMPT_TIER", str(other))
    _, judge = _tier(store, passages)
    assert _user(judge.requests[0]).startswith("From the environment.")
    # the call's own prompt wins over the setting
    _, judge = _tier(store, passages, prompt=Prompt("Mine. [QUERY] [PASSAGES]"))
    assert _user(judge.requests[0]).startswith("Mine.")
    # and BUILTIN_PROMPT is the built-in one without reading the settings (a broken file)
    config.write_text("[prompts]\nnot_a_job = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown job"):
        _tier(store, passages)
    builtin, _ = _tier(store, passages, prompt=BUILTIN_PROMPT)
    assert builtin.prompt_version == TIER_TEMPLATE.version


def test_rerank_prompt_replaces_the_strategy_step_and_is_checked_against_it(
    store: SqlStore, passages: list[Passage]
) -> None:
    prompt = Prompt("Rank for a clinician.\nQ: [QUERY]\n[PASSAGES]\n[COUNT] entries.")
    judge = ScriptedJudge([rank_reply()])
    result = rerank(
        QUERY, passages, judge=judge, store=store, settings=FAST, strategy="allpairs", prompt=prompt
    )
    assert _user(judge.requests[0]).startswith("Rank for a clinician.")
    assert result.prompt_version not in (RERANK_TEMPLATE.version, "")
    # the pairwise step fills other placeholders: the same prompt is wrong for it
    with pytest.raises(ConfigError, match=r"\[COUNT\], \[PASSAGES\] for the rerank.pair"):
        rerank(QUERY, passages, judge=judge, store=store, strategy="pairwise", prompt=prompt)
    with pytest.raises(ConfigError, match=r"rerank.pair prompt lacks .*\[PASSAGE_B\]"):
        rerank(
            QUERY,
            passages,
            judge=judge,
            store=store,
            strategy="pairwise",
            prompt=Prompt("Which is better for [QUERY]? A: [PASSAGE_A]"),
        )


def test_classify_prompt_is_sent_and_versioned(store: SqlStore) -> None:
    prompt = Prompt(
        "Sort the customer message.\nLabels:\n[LABELS]\nMessage: [INPUT]\nContext:\n[CONTEXT]",
        system="You route support tickets.",
    )
    judge = ScriptedJudge([cf.reply()])
    result = classify(
        cf.INPUT, cf.PASSAGES, cf.TAXONOMY, judge=judge, store=store, settings=FAST, prompt=prompt
    )
    messages = judge.requests[0].messages
    assert messages[0].content == "You route support tickets."
    assert messages[1].content.startswith("Sort the customer message.")
    assert cf.INPUT in messages[1].content and "REFUND" in messages[1].content
    assert [c.label for c in result.classifications] == ["REFUND"]
    default = classify(
        cf.INPUT, cf.PASSAGES, cf.TAXONOMY, judge=ScriptedJudge([cf.reply()]), store=store
    )
    assert result.prompt_version != default.prompt_version


def test_audit_prompt_replaces_the_grading_step_of_its_mode(store: SqlStore) -> None:
    from evidex.jobs.audit import audit
    from tests import audit_fixtures as af

    one_pass = Prompt("Audit for a regulator.\nAnswer: [ANSWER]\nContext: [CONTEXT]")
    judge = ScriptedJudge([af.reply(af.supported(), af.inferred(), af.contradicted())])
    result = audit(af.ANSWER, af.PASSAGES, judge=judge, store=store, settings=FAST, prompt=one_pass)
    assert _user(judge.requests[0]).startswith("Audit for a regulator.")
    assert af.FOUNDED in _user(judge.requests[0]) and len(result.claims) == 3
    default = audit(af.ANSWER, af.PASSAGES, judge=ScriptedJudge(), store=store, settings=FAST)
    assert result.prompt_version != default.prompt_version

    # two-pass: the prompt grades the extracted claims; extraction keeps its wording
    grading = Prompt("Grade these claims.\n[CLAIMS]\nContext: [CONTEXT]")
    judge = ScriptedJudge(
        [{"claims": [af.FOUNDED]}, {"claims": [af.graded("claim-1", af.supported())]}]
    )
    audit(
        af.FOUNDED, af.PASSAGES, judge=judge, store=store, settings=FAST, mode="two-pass",
        prompt=grading,
    )  # fmt: skip
    assert [r.step for r in judge.requests] == ["audit.extract", "audit.classify"]
    assert not _user(judge.requests[0]).startswith("Grade these claims.")
    assert _user(judge.requests[1]).startswith("Grade these claims.")
    # each mode checks the file against its own step
    with pytest.raises(
        ConfigError, match=r"audit prompt lacks the required placeholder \[ANSWER\]"
    ):
        audit(af.ANSWER, af.PASSAGES, judge=judge, store=store, prompt=Prompt("[CONTEXT]"))
    with pytest.raises(ConfigError, match=r"unknown placeholder \[ANSWER\] for the audit.classify"):
        audit(af.ANSWER, af.PASSAGES, judge=judge, store=store, mode="two-pass", prompt=one_pass)


def test_given_claims_with_a_one_pass_prompt_are_refused(store: SqlStore) -> None:
    from evidex.jobs.audit import AnswerInput, audit_many
    from tests import audit_fixtures as af

    judge = ScriptedJudge()
    item = AnswerInput(answer=af.FOUNDED, passages=af.PASSAGES, claims=[af.FOUNDED])
    with pytest.raises(ConfigError, match="use mode='two-pass' with a claim-grading prompt"):
        audit_many([item], judge=judge, store=store, prompt=Prompt("[ANSWER] [CONTEXT]"))
    assert judge.requests == []


def test_an_evaluation_runs_and_reports_the_configured_prompt(
    tmp_path: Path, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidex.evaluate.run import evaluate
    from tests.evalkit import MarkerJudge, write_golden

    golden = write_golden(tmp_path / "g.jsonl")
    built_in = evaluate("tier", golden, judge=MarkerJudge(), store=store, out_dir=tmp_path / "a")
    path = tmp_path / "tier.txt"
    path.write_text(TIER_PROMPT, encoding="utf-8")
    monkeypatch.setenv("EVIDEX_PROMPT_TIER", str(path))
    custom = evaluate("tier", golden, judge=MarkerJudge(), store=store, out_dir=tmp_path / "b")

    assert custom["run"]["prompt_version"] != built_in["run"]["prompt_version"]
    path.write_text(TIER_PROMPT + "Be brief.\n", encoding="utf-8")
    edited = evaluate("tier", golden, judge=MarkerJudge(), store=store, out_dir=tmp_path / "c")
    assert edited["run"]["prompt_version"] != custom["run"]["prompt_version"]
