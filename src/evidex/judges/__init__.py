"""Judge backends, chosen by spec string (``openai:gpt-4o-mini``, ``local:minilm``).

What lives here: the backends behind :class:`~evidex.judging.Judge` (``openai:``,
``local:minilm``, ``local:qwen``, ``local:gguf``, ``local:cross-encoder``),
:mod:`evidex.judges.scoring` (the scoring capability and
its adapter) and :mod:`evidex.judges.cascade` (a judge of two judges). This is the only package
that imports a vendor SDK or a model runtime (openai, onnxruntime, onnx, tokenizers,
llama-cpp-python, bm25s), and only inside the backend that needs it, which the registry
imports on first use: ``import evidex`` loads none of them. Public: this module,
:mod:`evidex.judges.scoring`, :mod:`evidex.judges.cascade` and :mod:`evidex.judges.minilm`;
modules whose name starts with ``_`` are private to the package and imported by no other
package.

What it may import: :mod:`evidex.judging`, :mod:`evidex.errors`, :mod:`evidex.types`, the
types of :mod:`evidex.tasks` and :mod:`evidex._text`; never ``jobs``, ``harness``, ``cli``,
``service`` or ``store``, which sit above it.

The registry maps a spec prefix to a lazily imported factory, so a missing optional dependency
only matters when its judge is asked for, and then says what to install. New backends add a
row; nothing guesses a backend from a model name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from evidex.errors import ConfigError, UnknownJudgeError
from evidex.judging import Judge

__all__ = ["JUDGES", "get_judge", "register_judge"]

# spec → "module:factory". The factory takes (spec, **options) and returns a Judge.
JUDGES: dict[str, str] = {
    "openai": "evidex.judges._openai:OpenAIJudge.from_spec",
    "local:minilm": "evidex.judges.minilm:MiniLMJudge.from_spec",
    "local:qwen": "evidex.judges._qwen:QwenJudge.from_spec",
    "local:cross-encoder": "evidex.judges._cross_encoder:CrossEncoderJudge.from_spec",
    "local:gguf": "evidex.judges._gguf:GGUFJudge.from_spec",
    "cascade": "evidex.judges.cascade:CascadeJudge.from_spec",
}


def register_judge(prefix: str, factory: str | Callable[..., Judge]) -> None:
    """Add a backend: ``prefix`` is matched against the spec (exactly, or before ``:``)."""
    JUDGES[prefix] = factory  # type: ignore[assignment]


def get_judge(spec: str, **options: Any) -> Judge:
    """Build a judge from its spec string. Unknown options are rejected by the backend.

    ``max_concurrency`` is an option of every judge: how many calls the instance may have in
    flight at once, over every job and request that uses it (see :mod:`evidex.limits`).
    """
    spec = spec.strip()
    limit = options.pop("max_concurrency", None)
    if limit is not None:
        try:
            limit = int(limit)
        except (TypeError, ValueError):
            limit = 0
        if limit < 1:
            raise ConfigError(f"max_concurrency must be a whole number of at least 1: {spec}")
    target = JUDGES.get(spec) or JUDGES.get(spec.split(":", 1)[0])
    if target is None or (spec.split(":", 1)[0] == "openai" and ":" not in spec):
        known = ", ".join(sorted(k if ":" in k else f"{k}:MODEL" for k in JUDGES))
        raise UnknownJudgeError(f"unknown judge {spec!r}; known judges: {known}")
    factory = _load(target) if isinstance(target, str) else target
    judge = factory(spec, **options)
    if limit is not None:
        judge.max_concurrency = limit
    return judge


def _load(target: str) -> Callable[..., Judge]:
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]
