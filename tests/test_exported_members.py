"""The public surface is explicit: every name in ``evidex.__all__`` exists, and nothing else
public is exported by accident."""

from __future__ import annotations

import evidex


def test_all_exports_exist() -> None:
    for name in evidex.__all__:
        assert hasattr(evidex, name), name


def test_every_export_is_loaded_lazily_from_where_type_checkers_see_it() -> None:
    """``__all__``, the lazy table and the imports type checkers read name the same things:
    a name added to one and not the others fails here, not in a user's editor."""
    import ast
    from pathlib import Path

    assert set(evidex._LAZY) | {"__version__"} == set(evidex.__all__)
    tree = ast.parse(Path(evidex.__file__).read_text(encoding="utf-8"))
    [guarded] = [n for n in tree.body if isinstance(n, ast.If)]
    seen = {
        alias.name: node.module
        for node in ast.walk(guarded)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == evidex._LAZY


def test_no_public_name_outside_all() -> None:
    # "@py_builtins" and "@pytest_ar": pytest's assertion rewriting adds them to the modules of
    # a distribution that ships a pytest plugin, as evidex does (evidex.testing.plugin)
    public = {n for n in dir(evidex) if not n.startswith(("_", "@"))}
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
        "frontier",
        "review_policy",
        "testing",
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


def test_version_and_import_load_none_of_the_commands() -> None:
    """``evidex --version`` and ``import evidex`` load neither the jobs nor typer and rich:
    each call of a shell pipeline pays for what it runs (bench/startup.py has the times)."""
    import subprocess
    import sys

    probe = (
        "import sys; from evidex.cli import main; code = main(['--version']); "
        "print(code, sorted(m for m in ('typer', 'rich', 'pydantic', 'evidex.jobs') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == "0 []", out.stdout
    assert out.stdout.startswith(f"evidex {evidex.__version__}")
    light = "import sys, evidex; print('pydantic' in sys.modules, 'evidex.jobs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", light], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
