"""The public surface is explicit: every name in ``evidex.__all__`` exists, and nothing else
public is exported by accident."""

from __future__ import annotations

import evidex


def test_all_exports_exist() -> None:
    for name in evidex.__all__:
        assert hasattr(evidex, name), name


def test_no_public_name_outside_all() -> None:
    public = {n for n in dir(evidex) if not n.startswith("_")}
    modules = {
        "bulk",
        "errors",
        "harness",
        "jobs",
        "judges",
        "judging",
        "limits",
        "loaders",
        "store",
        "tasks",
        "types",
        "taxonomy",
        "preflight",
        "evaluate",
        "service",
        "cli",
        "config",
        "integrations",
        "pricing",
    }
    assert public - set(evidex.__all__) - modules == set()


def test_import_is_light() -> None:
    import subprocess
    import sys

    heavy = "('onnxruntime', 'llama_cpp', 'fastapi', 'openai', 'langchain_core', 'llama_index',"
    heavy += " 'haystack')"
    code = f"import sys, evidex; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
