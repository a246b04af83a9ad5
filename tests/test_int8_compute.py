"""The int8-compute graph derived from the shipped weight-only int8 MiniLM (``_int8_compute``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from evidex.errors import ConfigError
from evidex.judges import get_judge
from evidex.judges.minilm import MiniLMJudge
from evidex.judges.minilm._int8_compute import RECIPE, int8_compute_model


def _weight_only_int8_graph(path: Path, seed: int = 0) -> np.ndarray:
    """A one-MatMul graph stored the way the shipped model stores weights: int8 + per-column
    scale, dequantized on every run by Cast and Mul. Returns the float32 weight it computes."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-127, 128, size=(16, 8), dtype=np.int8)
    q[0, :] = 127  # every column uses the full range, as a symmetric per-column quantizer does
    scale = rng.uniform(0.001, 0.01, size=(1, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "weight_only_int8",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        initializer=[numpy_helper.from_array(q, "w_q"), numpy_helper.from_array(scale, "w_scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return q.astype(np.float32) * scale


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


def test_the_derived_graph_multiplies_in_int8_and_keeps_the_weights(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    weight = _weight_only_int8_graph(source)

    derived = int8_compute_model(source, tmp_path / "cache")

    ops = {node.op_type for node in onnx.load(str(derived)).graph.node}
    assert "MatMulInteger" in ops and "MatMul" not in ops and "Cast" in ops
    x = np.random.default_rng(1).normal(size=(4, 16)).astype(np.float32)
    exact = x @ weight
    got = _run(derived, x)
    # only the activations are newly quantized (8 bits per batch): a small relative error
    assert np.abs(got - exact).max() <= 0.02 * np.abs(exact).max()
    assert np.allclose(_run(source, x), exact, atol=1e-5)


def test_the_derived_graph_is_built_once_and_named_by_source_and_recipe(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    _weight_only_int8_graph(source)
    first = int8_compute_model(source, tmp_path)
    stamp = first.stat().st_mtime_ns

    again = int8_compute_model(source, tmp_path)

    assert again == first and again.stat().st_mtime_ns == stamp
    assert RECIPE in first.name and f"ort{ort.__version__}" in first.name
    assert not list(first.parent.glob("*.partial"))  # written aside, then renamed

    _weight_only_int8_graph(source, seed=2)  # another model: another file
    assert int8_compute_model(source, tmp_path) != first


def test_a_model_that_cannot_be_derived_is_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(b"not an onnx file")

    with pytest.raises(ConfigError, match="compute='float32'"):
        int8_compute_model(source, tmp_path / "cache")
    assert not list((tmp_path / "cache" / "models").glob("*"))  # nothing half-written is left


def test_the_judge_runs_the_derived_graph_unless_asked_for_float32(tmp_path: Path) -> None:
    int8 = get_judge("local:minilm", cache_dir=tmp_path)
    float32 = get_judge("local:minilm", compute="float32")
    assert isinstance(int8, MiniLMJudge) and isinstance(float32, MiniLMJudge)
    query = "how many moons does mars have"
    texts = ["Mars has two small moons, Phobos and Deimos.", "Bread rises because of yeast."]

    fast, exact = int8.score(query, texts), float32.score(query, texts)

    assert list(tmp_path.glob("models/minilm-*.onnx"))
    assert fast[0] > fast[1] and exact[0] > exact[1]
    assert np.allclose(fast, exact, atol=0.05)
    assert int8.fingerprint()["compute"] != float32.fingerprint()["compute"]
    assert "int8 compute" in int8.model_version and "float32" in float32.model_version
