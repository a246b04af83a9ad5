"""MkDocs hook: the API reference, one page per public module of the package
(``reference/<module>.md``), rendered from its docstrings by mkdocstrings, and its nav.

The modules are found in the package, so a new public module is in the reference without an
edit here; the command line and the service are documented by their own pages (and by
``--help`` and ``/openapi.json``).
"""

from __future__ import annotations

import pkgutil
import re
from typing import Any

from site_tables import fill_nav

REFERENCE_DIR = "reference"
NOT_IN_REFERENCE = ("evidex.cli", "evidex.service")
"""Packages whose surface is a command line or HTTP, documented on their own pages."""


def public_modules() -> list[str]:
    """Every public module of the package (no part of its name private), in name order,
    without the command line and the service."""
    import evidex

    found = ["evidex"]
    for info in pkgutil.walk_packages(evidex.__path__, "evidex.", onerror=lambda _: None):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts):
            continue
        if info.name.startswith(NOT_IN_REFERENCE):
            continue
        found.append(info.name)
    return sorted(found)


def reference_page(module: str) -> str:
    return f"# `{module}`\n\n::: {module}\n"


def reference_index() -> str:
    lines = [
        "# API reference",
        "",
        "Every public module, rendered from its docstrings. The names most code needs are "
        "re-exported by [`evidex`](evidex.md) itself.",
        "",
    ]
    lines += [f"- [`{m}`]({m}.md)" for m in public_modules()]
    return "\n".join(lines) + "\n"


def reference_nav() -> list[dict[str, Any]]:
    """The reference's nav: root modules one by one, each package a section of its modules."""
    modules = public_modules()
    nav: list[dict[str, Any]] = []
    sections: dict[str, list[Any]] = {}
    for m in modules:
        page = f"{REFERENCE_DIR}/{m}.md"
        top = ".".join(m.split(".")[:2])
        if not any(n.startswith(top + ".") for n in modules):
            nav.append({m: page})  # the root package and its plain modules
        elif top not in sections:
            sections[top] = [page]
            nav.append({top: sections[top]})
        else:
            sections[top].append({m.removeprefix(top + "."): page})
    return nav


def on_config(config: Any) -> Any:
    fill_nav(config, f"{REFERENCE_DIR}/index.md", reference_nav())
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, f"{REFERENCE_DIR}/index.md", content=reference_index()))
    for module in public_modules():
        page = f"{REFERENCE_DIR}/{module}.md"
        files.append(File.generated(config, page, content=reference_page(module)))
    return files


_HTML_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):<code>~?(?:[\w.]+\.)?")


def on_page_content(html: str, **_: Any) -> str:
    """Docstrings name objects with Sphinx roles (``:class:`~a.b.C```), and Markdown would
    show the role: on every page (the reference and the job pages both quote docstrings) it
    goes, and a ``~`` name is cut to its last part, as Sphinx shows it."""
    return _HTML_ROLE.sub(_role_code, html)


def _role_code(match: re.Match[str]) -> str:
    said = match.group(0)
    return "<code>" if "~" in said else "<code>" + said.split("<code>", 1)[1]
