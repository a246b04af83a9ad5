"""MkDocs hook: README parts in the site's pages, their links made to work there.

The pages include README parts with ``pymdownx.snippets`` (``--8<-- "README.md:name"``, the
part between the README's ``<!-- --8<-- [start:name] -->`` and ``[end:name]`` markers), so the
site keeps no second copy to drift. The README's links are relative to the repository root:
:class:`ReadmeLinks` makes ``docs/...`` links relative to the including page, and the files of
the folders in :data:`PUBLISHED` are published with the site, so ``mkdocs build --strict``
checks every such link like any other.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ("examples",)
"""Repository folders the README links into, published with the site."""


class ReadmeLinks(Extension):  # type: ignore[misc]
    """Rewrites the links that README parts bring in (relative to the repository root) to be
    relative to the page that includes them. Runs after ``pymdownx.snippets`` has inserted
    the parts (its preprocessor has priority 32)."""

    def __init__(self) -> None:
        super().__init__()
        self.page = ""

    def extendMarkdown(self, md: Markdown) -> None:
        md.preprocessors.register(_Rewrite(md, self), "evidex_readme_links", 31)


_LINK = re.compile(r"(\]\()((?:docs|" + "|".join(PUBLISHED) + r")/[^)\s]+)(\))")


class _Rewrite(Preprocessor):  # type: ignore[misc]
    def __init__(self, md: Markdown, owner: ReadmeLinks) -> None:
        super().__init__(md)
        self.owner = owner

    def run(self, lines: list[str]) -> list[str]:
        here = posixpath.dirname(self.owner.page)
        return [_LINK.sub(lambda m: m[1] + _relative(m[2], here) + m[3], line) for line in lines]


def _relative(target: str, here: str) -> str:
    in_site = target.removeprefix("docs/")
    return posixpath.relpath(in_site, here or ".")


_LINKS = ReadmeLinks()


def on_config(config: Any) -> Any:
    config.markdown_extensions.append(_LINKS)
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for folder in PUBLISHED:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                uri = path.relative_to(ROOT).as_posix()
                files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Tells the link rewriter which page is being rendered."""
    _LINKS.page = page.file.src_uri
    return markdown
