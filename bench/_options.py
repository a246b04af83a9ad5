"""The ``--option KEY=VALUE`` flag that benchmarks use to pass options to their judge.

One place, so every benchmark reads options the same way: ``--option n_threads=1`` for
``local:qwen``, ``--option base_url=http://127.0.0.1:8000/v1`` for an ``openai:`` judge.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

__all__ = ["add_option_flag", "judge_options"]


def add_option_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="judge option, repeatable (e.g. n_threads=1 for local:qwen); VALUE is read as JSON "
        "when it parses, else as text",
    )


def judge_options(values: Sequence[str]) -> dict[str, Any]:
    """``["n_threads=1", "seed=3"]`` → ``{"n_threads": 1, "seed": 3}``."""
    options: dict[str, Any] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--option needs KEY=VALUE, got {text!r}")
        try:
            options[key.strip()] = json.loads(value)
        except ValueError:
            options[key.strip()] = value
    return options
