"""``local:cross-encoder``: the user's ONNX cross-encoder, on model files the tests build.

No cross-encoder ships in any package reachable here, so the fixture derives one from the
shipped MiniLM graph (int8 weights): its token states are split by token type into the query
segment and the passage segment, and a small head turns the cosine of the two segment means
into a relevance logit, ``20 * cos - 15``. That is a cross-encoder in shape (a pair in, one
logit out, token type ids read) whose scores order a clearly relevant passage above an
unrelated one; a second head returns the ``[batch, 2]`` class logits
``[-logit / 2, logit / 2]``, whose difference is the same logit.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tokenizers
from onnx import TensorProto, helper, numpy_helper

from evidex.cli import main
from evidex.errors import ConfigError
from evidex.jobs.rerank import rerank
from evidex.jobs.tier import tier
from evidex.judges import get_judge
from evidex.judges._cross_encoder import DEFAULT_CUT_POINTS, CrossEncoderJudge
from evidex.judges.minilm import MiniLMJudge
from evidex.judging import JudgeRequest, PassagesPayload, PassageText, RankPayload, ScorePayload
from evidex.store import SqlStore
from evidex.tasks.tier import TierBatch, TierStep
from evidex.types import DEFAULT_TIERS, Passage

QUERY = "What is the recommended daily dose of vitamin D for adults?"
RELEVANT = (
    "Vitamin D is a fat-soluble vitamin. Most adults need 600 IU of vitamin D a day, and adults "
    "over 70 need 800 IU. Fatty fish and fortified milk are good sources."
)
IRRELEVANT = "The ferry to the island leaves the harbour at noon and returns in the evening."
TOKENIZER = Path(__file__).resolve().parent.parent / "src/evidex/data/minilm/tokenizer.json"


def _head(graph: onnx.GraphProto, *, two_classes: bool) -> None:
    """Replace the graph's output by ``20 * cos(mean query states, mean passage states) - 15``."""
    hidden = graph.output[0].name
    constants: dict[str, np.ndarray[Any, Any]] = {
        "ce_axis1": np.array([1], dtype=np.int64),
        "ce_axis2": np.array([2], dtype=np.int64),
        "ce_scale": np.array(20.0, dtype=np.float32),
        "ce_bias": np.array(-15.0, dtype=np.float32),
        "ce_half": np.array(0.5, dtype=np.float32),
    }
    for name, value in constants.items():
        graph.initializer.append(numpy_helper.from_array(value, name))
    node = helper.make_node
    logit = "ce_logit" if two_classes else "logits"
    graph.node.extend(
        [
            node("Cast", ["attention_mask"], ["ce_m"], to=TensorProto.FLOAT),
            node("Cast", ["token_type_ids"], ["ce_t"], to=TensorProto.FLOAT),
            node("Mul", ["ce_m", "ce_t"], ["ce_pm"]),  # passage tokens (type 1)
            node("Sub", ["ce_m", "ce_pm"], ["ce_qm"]),  # query tokens (type 0)
        ]
    )
    for seg in ("p", "q"):
        graph.node.extend(
            [
                node("Unsqueeze", [f"ce_{seg}m", "ce_axis2"], [f"ce_{seg}m3"]),
                node("Mul", [hidden, f"ce_{seg}m3"], [f"ce_{seg}h"]),
                node("ReduceSum", [f"ce_{seg}h", "ce_axis1"], [f"ce_{seg}"], keepdims=0),
                node("Mul", [f"ce_{seg}", f"ce_{seg}"], [f"ce_{seg}2"]),
                node("ReduceSum", [f"ce_{seg}2", "ce_axis1"], [f"ce_{seg}n2"], keepdims=1),
            ]
        )
    graph.node.extend(
        [
            node("Mul", ["ce_p", "ce_q"], ["ce_pq"]),
            node("ReduceSum", ["ce_pq", "ce_axis1"], ["ce_dot"], keepdims=1),
            node("Mul", ["ce_pn2", "ce_qn2"], ["ce_n2"]),
            node("Sqrt", ["ce_n2"], ["ce_n"]),
            node("Div", ["ce_dot", "ce_n"], ["ce_cos"]),
            node("Mul", ["ce_cos", "ce_scale"], ["ce_s"]),
            node("Add", ["ce_s", "ce_bias"], [logit]),
        ]
    )
    if two_classes:
        graph.node.extend(
            [
                node("Mul", [logit, "ce_half"], ["ce_up"]),
                node("Neg", ["ce_up"], ["ce_down"]),
                node("Concat", ["ce_down", "ce_up"], ["logits"], axis=1),
            ]
        )
    del graph.output[:]
    width = 2 if two_classes else 1
    graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", width]))


def _untyped_head(graph: onnx.GraphProto) -> None:
    """A graph without a ``token_type_ids`` input (zeros made inside), whose logit is the mean
    token state times a fixed vector: a shape for the runtime, not a relevance model."""
    (typed,) = [i for i in graph.input if i.name == "token_type_ids"]
    graph.input.remove(typed)
    weights = np.random.default_rng(0).normal(size=(384, 1)).astype(np.float32)
    graph.initializer.append(numpy_helper.from_array(weights, "ce_w"))
    graph.initializer.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "ce_ax"))
    hidden = graph.output[0].name
    node = helper.make_node
    graph.node.insert(0, node("Sub", ["input_ids", "input_ids"], ["token_type_ids"]))
    graph.node.extend(
        [
            node("ReduceMean", [hidden], ["ce_mean"], axes=[1], keepdims=0),
            node("MatMul", ["ce_mean", "ce_w"], ["logits"]),
        ]
    )
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 1]))


def _model_dir(
    root: Path,
    name: str,
    *,
    file: str = "model.onnx",
    two_classes: bool = False,
    token_types: bool = True,
) -> Path:
    graph = onnx.load(str(MiniLMJudge()._model_path))
    if token_types:
        _head(graph.graph, two_classes=two_classes)
    else:
        _untyped_head(graph.graph)
    directory = root / name
    directory.mkdir()
    onnx.save(graph, str(directory / file))
    shutil.copy(TOKENIZER, directory / "tokenizer.json")
    return directory


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cross-encoders")
    return {
        "one": _model_dir(root, "one"),
        "two": _model_dir(root, "two", file="model_quantized.onnx", two_classes=True),
        "untyped": _model_dir(root, "untyped", token_types=False),
    }


@pytest.fixture(scope="module")
def judge(models: dict[str, Path]) -> CrossEncoderJudge:
    built = get_judge("local:cross-encoder", path=str(models["one"]))
    assert isinstance(built, CrossEncoderJudge)
    return built


def _answer(judge: CrossEncoderJudge, request: JudgeRequest) -> Any:
    return json.loads(asyncio.run(judge.complete(request)).text)


def _request(step: str, payload: PassagesPayload) -> JudgeRequest:
    return JudgeRequest(job="rerank", step=step, messages=(), schema={}, payload=payload)


def _direct_logit(model: Path, query: str, text: str) -> float:
    """The pair run by hand: the tokenizer's own pair template, onnxruntime, no evidex."""
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.no_truncation()
    enc = tok.encode(query, text)
    feeds = {
        "input_ids": np.array([enc.ids], dtype=np.int64),
        "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
        "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
    }
    assert enc.tokens[0] == "[CLS]" and enc.type_ids[-1] == 1  # [CLS] q [SEP] p [SEP]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    taken = {i.name for i in session.get_inputs()}
    feeds = {k: v for k, v in feeds.items() if k in taken}
    out = session.run(None, feeds)[0]
    return float(out[0, 0] if out.shape[1] == 1 else out[0, 1] - out[0, 0])


# ------------------------------------------------------------------ scores


def test_scores_are_the_graphs_logits_and_order_relevant_first(
    judge: CrossEncoderJudge, models: dict[str, Path]
) -> None:
    logits = judge.logits(QUERY, [RELEVANT, IRRELEVANT])
    assert logits == pytest.approx(
        [_direct_logit(models["one"] / "model.onnx", QUERY, t) for t in (RELEVANT, IRRELEVANT)],
        abs=1e-4,
    )
    assert logits[0] > logits[1] + 1
    assert judge.score(QUERY, [RELEVANT]) == pytest.approx([1 / (1 + math.exp(-logits[0]))])


def test_two_class_output_reads_as_the_difference_of_the_logits(
    judge: CrossEncoderJudge, models: dict[str, Path]
) -> None:
    two = get_judge("local:cross-encoder", path=models["two"])  # model_quantized.onnx found
    assert isinstance(two, CrossEncoderJudge)
    assert two.fingerprint()["output"] == "two class logits"
    direct = _direct_logit(models["two"] / "model_quantized.onnx", QUERY, IRRELEVANT)
    assert two.logits(QUERY, [IRRELEVANT]) == pytest.approx([direct], abs=1e-4)
    assert two.logits(QUERY, [RELEVANT, IRRELEVANT]) == pytest.approx(
        judge.logits(QUERY, [RELEVANT, IRRELEVANT]), abs=1e-4
    )


def test_a_graph_without_token_type_ids_gets_none(models: dict[str, Path]) -> None:
    untyped = get_judge("local:cross-encoder", path=models["untyped"])
    assert isinstance(untyped, CrossEncoderJudge)
    direct = [_direct_logit(models["untyped"] / "model.onnx", QUERY, t) for t in (RELEVANT, "x")]
    assert untyped.logits(QUERY, [RELEVANT, "x"]) == pytest.approx(direct, abs=1e-4)


def test_the_cli_runs_it_with_judge_options(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passages = tmp_path / "passages.jsonl"
    rows = [{"passage_id": "ferry", "text": IRRELEVANT}, {"passage_id": "answer", "text": RELEVANT}]
    passages.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    argv = ["-q", QUERY, "-p", str(passages), "--judge", "local:cross-encoder"]
    argv += ["--judge-option", f"path={models['one']}", "--judge-option", "thresholds=0.5,0.3,0.2"]
    assert main(["rerank", *argv]) == 0
    ranked = json.loads(capsys.readouterr().out)["ranked_passages"]
    assert [r["passage_id"] for r in ranked] == ["answer", "ferry"]
    assert main(["tier", *argv]) == 0
    tiers = {
        c["passage_id"]: c["tier"] for c in json.loads(capsys.readouterr().out)["classifications"]
    }
    # the default cut points (0.9,0.5,0.1) would give contextually-relevant, tangentially-related
    assert tiers == {"answer": "directly-supporting", "ferry": "irrelevant"}


def test_a_score_does_not_depend_on_its_batch(models: dict[str, Path]) -> None:
    texts = [RELEVANT, IRRELEVANT, "Vitamin D helps the body absorb calcium."]
    alone = get_judge("local:cross-encoder", path=models["one"])
    batched = get_judge("local:cross-encoder", path=models["one"], batch_size=8)
    assert isinstance(alone, CrossEncoderJudge) and isinstance(batched, CrossEncoderJudge)
    assert alone.logits(QUERY, texts) == [alone.logits(QUERY, [t])[0] for t in texts]
    assert batched.logits(QUERY, texts) == pytest.approx(alone.logits(QUERY, texts), abs=0.05)


# ------------------------------------------------------------------ replies


def test_tier_reply_validates_quotes_the_best_sentence_and_grades_by_cut_points(
    judge: CrossEncoderJudge,
) -> None:
    batch = TierBatch(
        QUERY,
        (Passage(passage_id="answer", text=RELEVANT), Passage(passage_id="ferry", text=IRRELEVANT)),
    )
    step = TierStep().request(batch)
    request = JudgeRequest(
        job="tier", step="tier", messages=step.messages, schema=step.schema, payload=step.payload
    )
    data = _answer(judge, request)
    value = TierStep().validate(batch, data)  # raises ReplyInvalid on any problem
    answer, ferry = value.classifications
    best = judge.best_sentences(QUERY, RELEVANT)[0]
    assert answer.key_evidence_snippet == best.text and best.text in RELEVANT
    assert ferry.key_evidence_snippet == IRRELEVANT
    names = DEFAULT_TIERS.names
    scores = judge.score(QUERY, [RELEVANT, IRRELEVANT])
    expected = [
        names[next((i for i, c in enumerate(DEFAULT_CUT_POINTS) if s >= c), 3)] for s in scores
    ]
    assert [answer.tier, ferry.tier] == expected
    assert names.index(answer.tier) < names.index(ferry.tier)
    assert "cross-encoder relevance" in answer.justification
    assert f"{scores[0]:.3f}" in answer.justification


def test_rerank_and_score_step_replies(judge: CrossEncoderJudge) -> None:
    texts = (PassageText("x", IRRELEVANT), PassageText("y", RELEVANT))
    ranked = _answer(judge, _request("rerank", RankPayload(QUERY, texts)))["ranked_passages"]
    assert [(r["rank"], r["passage_id"]) for r in ranked] == [(1, "y"), (2, "x")]
    assert all(0 <= r["relevance_score"] <= 1 for r in ranked)
    scored = _answer(judge, _request("score", ScorePayload(QUERY, texts)))["scores"]
    assert [s["relevance_score"] for s in scored] == pytest.approx(
        judge.score(QUERY, [IRRELEVANT, RELEVANT])
    )


def test_tier_and_rerank_jobs_end_to_end(store: SqlStore, judge: CrossEncoderJudge) -> None:
    items = [
        Passage(passage_id="ferry", text=IRRELEVANT),
        Passage(passage_id="answer", text=RELEVANT),
        Passage(passage_id="stocks", text="Shares in the bank fell four percent on Tuesday."),
    ]
    tiered = tier(QUERY, items, judge=judge, store=store)
    assert {a.source for a in tiered.classifications} == {"judge"}
    names = DEFAULT_TIERS.names
    assert names.index(tiered.tier_of("answer")) < names.index(tiered.tier_of("ferry"))
    ranked = rerank(QUERY, items, judge=judge, store=store)
    assert ranked.source == "judge" and ranked.strategy == "pointwise"
    assert ranked.ranked_passages[0].passage_id == "answer"


def test_cut_points_option_and_identity(models: dict[str, Path], judge: CrossEncoderJudge) -> None:
    strict = get_judge("local:cross-encoder", path=models["one"], thresholds="0.99,0.98,0.97")
    assert isinstance(strict, CrossEncoderJudge)
    assert strict.cut_points == (0.99, 0.98, 0.97)
    assert judge.thresholds.for_tiers(4) == DEFAULT_CUT_POINTS
    assert judge.thresholds.for_tiers(2) == pytest.approx((0.5,))  # the middle one
    assert strict.fingerprint() != judge.fingerprint()
    assert (
        judge.fingerprint()["model_sha256"]
        == __import__("hashlib").sha256((models["one"] / "model.onnx").read_bytes()).hexdigest()
    )
    assert judge.fingerprint()["model_sha256"][:12] in judge.model_version
    assert strict.cut_points_option((0.8, 0.4, 0.05)) == "thresholds=0.8,0.4,0.05"
    for bad in ("0.1,0.5,0.9", "0.9,x", "2,1,0"):
        with pytest.raises(ConfigError, match="thresholds"):
            get_judge("local:cross-encoder", path=models["one"], thresholds=bad)


# ------------------------------------------------------------------ clear errors


def test_missing_path_dir_or_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs path=DIR"):
        get_judge("local:cross-encoder")
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError, match=rf"{missing.name}.*does not exist.*optimum-cli"):
        get_judge("local:cross-encoder", path=missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"empty: no model.onnx or model_quantized.onnx"):
        get_judge("local:cross-encoder", path=empty)
    no_tokenizer = tmp_path / "no-tokenizer"
    no_tokenizer.mkdir()
    (no_tokenizer / "model.onnx").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"no-tokenizer/tokenizer.json: cannot read"):
        get_judge("local:cross-encoder", path=no_tokenizer)
    with pytest.raises(ConfigError, match=r"other.onnx: no such model file"):
        get_judge("local:cross-encoder", path=no_tokenizer, model_file="other.onnx")


def test_malformed_files_are_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.onnx").write_bytes(b"this is not a protobuf")
    (bad / "tokenizer.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"bad/tokenizer.json: not a valid tokenizer.json"):
        get_judge("local:cross-encoder", path=bad)
    shutil.copy(TOKENIZER, bad / "tokenizer.json")
    with pytest.raises(ConfigError, match=r"bad/model.onnx: cannot load the cross-encoder"):
        get_judge("local:cross-encoder", path=bad)


def test_a_graph_of_the_wrong_shape_is_a_clear_error(tmp_path: Path) -> None:
    encoder = tmp_path / "encoder"  # a bi-encoder: token states out, not a logit per pair
    encoder.mkdir()
    shutil.copy(MiniLMJudge()._model_path, encoder / "model.onnx")
    shutil.copy(TOKENIZER, encoder / "tokenizer.json")
    with pytest.raises(ConfigError, match=r"encoder/model.onnx: .*last_hidden_state.*\[batch, 1\]"):
        get_judge("local:cross-encoder", path=encoder)
    other = tmp_path / "other"  # a graph that takes other inputs
    other.mkdir()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), other / "model.onnx"
    )
    shutil.copy(TOKENIZER, other / "tokenizer.json")
    with pytest.raises(ConfigError, match=r"other/model.onnx: the graph takes \['x'\]"):
        get_judge("local:cross-encoder", path=other)


def test_calibrate_tier_fits_cut_points_on_the_score(
    tmp_path: Path, judge: CrossEncoderJudge, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = [
        (RELEVANT, "directly-supporting"),
        ("Vitamin D helps the body absorb calcium from food.", "contextually-relevant"),
        ("A daily walk improves mood and heart health.", "tangentially-related"),
        (IRRELEVANT, "irrelevant"),
    ]
    rows = [
        {"query_id": q, "query": query, "passage_id": f"{q}p{i}", "text": text, "tier": grade}
        for q, query in (("q1", QUERY), ("q2", "How much vitamin D does an adult need?"))
        for i, (text, grade) in enumerate(texts)
    ]
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "cal"
    argv = ["calibrate", "tier", "--golden", str(golden), "-o", str(out)]
    argv += ["--judge", "local:cross-encoder", "--judge-option", f"path={judge.files.model.parent}"]
    assert main(argv) == 0
    said = " ".join(capsys.readouterr().err.split())
    record = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    assert record["judge_id"] == "local:cross-encoder"
    assert record["model_version"] == judge.model_version
    cuts = record["fitted"]["cut_points"]
    assert len(cuts) == 3 and cuts == sorted(cuts, reverse=True)
    assert all(0 <= c <= 1 for c in cuts)  # on the sigmoid scale the thresholds option takes
    assert record["fitted"]["judge_option"] == judge.cut_points_option(cuts)
    assert f"add --judge-option {judge.cut_points_option(cuts)} to evidex tier" in said
    fitted = get_judge("local:cross-encoder", path=judge.files.model.parent, **_option(judge, cuts))
    assert isinstance(fitted, CrossEncoderJudge)
    assert fitted.cut_points == pytest.approx(cuts, rel=1e-3)


def _option(judge: CrossEncoderJudge, cuts: list[float]) -> dict[str, str]:
    key, _, value = judge.cut_points_option(cuts).partition("=")
    return {key: value}
