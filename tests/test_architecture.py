"""The layout keeps its rules: no import cycle, no private module imported from outside its
package, no module over 500 lines, and every package says what lives there. Read from the
source with ``ast``, so it needs no third-party tool and sees imports inside functions too
(imports under ``if TYPE_CHECKING:`` never run and are not counted)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
MAX_LINES = 500


class Tree:
    """The modules of one package below ``src`` and the imports between them."""

    def __init__(self, src: Path, package: str = "evidex") -> None:
        self.src = src
        self.modules = {self._name(p): p for p in sorted((src / package).rglob("*.py"))}
        self.graph = {n: sorted({t for t, _ in self.imports(n)}) for n in self.modules}

    def _name(self, path: Path) -> str:
        parts = list(path.relative_to(self.src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def is_package(self, name: str) -> bool:
        return self.modules[name].name == "__init__.py"

    def imports(self, name: str) -> Iterator[tuple[str, int]]:
        """The package's modules that ``name`` imports, with their line numbers."""
        tree = ast.parse(self.modules[name].read_text(encoding="utf-8"))
        skip = {
            getattr(sub, "lineno", -1)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for child in node.body
            for sub in ast.walk(child)
        }
        base = name if self.is_package(name) else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in self.modules:
                        yield alias.name, node.lineno
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base.split(".")
                    target = ".".join(parts[: len(parts) - node.level + 1])
                    target = f"{target}.{node.module}" if node.module else target
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in self.modules:
                        yield sub, node.lineno
                    elif target in self.modules:
                        yield target, node.lineno

    def cycle(self) -> list[str] | None:
        """One import cycle, if there is any. A module importing from its own package's
        ``__init__`` is no cycle: the package is initialised before its submodules."""
        state: dict[str, int] = {}
        stack: list[str] = []

        def visit(node: str) -> list[str] | None:
            state[node] = 1
            stack.append(node)
            for nxt in self.graph[node]:
                if nxt == node or node.startswith(nxt + "."):
                    continue
                if state.get(nxt) == 1:
                    return [*stack[stack.index(nxt) :], nxt]
                if nxt not in state and (found := visit(nxt)):
                    return found
            stack.pop()
            state[node] = 2
            return None

        for name in self.modules:
            if name not in state and (found := visit(name)):
                return found
        return None

    def private_imports(self) -> list[str]:
        """Imports of a private module (``evidex.jobs._common``) from outside the package that
        owns it (``evidex.jobs``). Private modules of the root (``evidex._text``) serve all."""
        offences = []
        for name in self.modules:
            for target, line in self.imports(name):
                parts = target.split(".")
                private = [i for i, part in enumerate(parts) if part.startswith("_")]
                if not private:
                    continue
                owner = ".".join(parts[: private[0]])
                if not (name == owner or name.startswith(owner + ".")):
                    offences.append(f"{self.modules[name].relative_to(self.src)}:{line} {target}")
        return offences


TREE = Tree(SRC)


def test_no_import_cycle() -> None:
    assert TREE.cycle() is None, " -> ".join(TREE.cycle() or [])


def test_no_private_module_is_imported_from_outside_its_package() -> None:
    assert TREE.private_imports() == []


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in TREE.modules.values()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


@pytest.mark.parametrize("name", sorted(n for n in TREE.modules if TREE.is_package(n)))
def test_every_package_says_what_lives_there(name: str) -> None:
    doc = ast.get_docstring(ast.parse(TREE.modules[name].read_text(encoding="utf-8")))
    assert doc and len(doc) > 40, f"{name} has no docstring saying what lives there"


def test_the_checks_find_a_cycle_and_a_private_import(tmp_path: Path) -> None:
    root = tmp_path / "evidex"
    (root / "jobs").mkdir(parents=True)
    (root / "cli").mkdir()
    files = {
        "__init__.py": "",
        "_text.py": "",
        "jobs/__init__.py": "",
        "jobs/_common.py": "from evidex import _text\n",
        "jobs/a.py": "from evidex.jobs import b\nfrom evidex.jobs._common import x\n",
        "jobs/b.py": "def f():\n    from . import a\n",
        "cli/__init__.py": "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from evidex.jobs import _common\n",
        "cli/run.py": "from ..jobs._common import x\n",
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    tree = Tree(tmp_path)
    assert tree.cycle() in (
        ["evidex.jobs.a", "evidex.jobs.b", "evidex.jobs.a"],
        ["evidex.jobs.b", "evidex.jobs.a", "evidex.jobs.b"],
    )
    assert tree.private_imports() == ["evidex/cli/run.py:1 evidex.jobs._common"]


HEAVY = ("sqlalchemy", "aiohttp", "numpy", "onnxruntime", "llama_cpp", "fastapi")


def test_import_evidex_loads_no_heavy_package() -> None:
    """``import evidex`` and ``evidex --help`` (and so every CLI call in a shell pipeline) pay
    for none of these: the store, the judges' runtimes and the service load when used."""
    import subprocess
    import sys

    loaded = f"print([m for m in {HEAVY!r} if m in sys.modules])"
    for probe in (
        f"import sys, evidex; {loaded}",
        f"import sys; from evidex.cli import main; main(['--help']); {loaded}",
    ):
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip().splitlines()[-1] == "[]", probe
    lazy = "import evidex; s = evidex.open_store('sqlite://'); print(type(s).__name__); s.close()"
    out = subprocess.run(
        [sys.executable, "-c", lazy], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "SqlStore"
