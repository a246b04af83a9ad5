"""The docs site builds with ``mkdocs build --strict`` (as ``make docs`` does), offline, and a
broken link, a missing README part or an API reference to nothing fails that build. The job
pages are read from the job registry: every option of every job is on its page with the flag
the command line gives it, its default and its bounds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")

from evidex.jobs import definition, definitions, job_names

ROOT = Path(__file__).resolve().parent.parent
HOOKS = ROOT / "docs" / "hooks"
MKDOCS = Path(sys.executable).with_name("mkdocs")


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The site's hook modules importable, as MkDocs loads them (their folder on the path)."""
    monkeypatch.syspath_prepend(str(HOOKS))
    yield


def _build(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` with no network: a proxy that does not exist stands in for
    it, so a plugin or theme that fetched anything at build time would fail here."""
    dead = "http://127.0.0.1:9"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "HTTP_PROXY": dead, "HTTPS_PROXY": dead}
    env |= {"http_proxy": dead, "https_proxy": dead, "NO_PROXY": "", "no_proxy": ""}
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(config), "-d", str(out)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _copy_of_the_site(tmp_path: Path) -> Path:
    """The site's sources in a temp dir (config, README, docs, the linked examples)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("docs", "examples"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=ignore)
    (copy / "src").symlink_to(ROOT / "src")
    return copy


# ---------------------------------------------------------------------------- the pages


def _rows(page: str, section: str) -> dict[str, str]:
    """The table rows of one ``## section`` of a generated page, by their first cell."""
    text = page.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    return {row.split(" | ")[0].strip("| `"): row for row in rows}


@pytest.mark.parametrize("name", job_names())
def test_a_job_page_has_every_option_with_its_flag_default_and_bounds(
    name: str, hooks: None
) -> None:
    import job_pages

    from evidex.cli._derive import cli_options

    d = definition(name)
    page = job_pages.job_page(name)
    options = _rows(page, "Options")
    for option in cli_options(d.options, owner=name):
        row = options[".".join(option.path)]
        assert f"`{option.flag}`" in row, row
    for field, info in d.options.model_fields.items():
        default = getattr(info.default, "value", info.default)  # an enum as its value
        if not info.is_required() and isinstance(default, int | float | str):
            assert f"`{default!r}`" in options[field], field
    assert set(d.input.model_fields) <= set(_rows(page, "Input"))
    payload = set(d.review.payload.model_fields) - {"passages", "steps"}  # on the overview
    assert payload <= set(_rows(page, "Review payload"))
    assert f'--8<-- "README.md:job-{name}"' in page  # the worked example: the README's


def test_tier_options_table_reads_the_bounds_and_help_of_the_model(hooks: None) -> None:
    import job_pages

    page = job_pages.job_page("tier")
    [row] = [line for line in page.splitlines() if line.startswith("| `batch_size`")]
    assert "`--batch-size`" in row and "`10`" in row and "≥ 5, ≤ 15" in row
    assert "Passages per judge call" in row
    [risk] = [line for line in page.splitlines() if line.startswith("| `risk`")]
    assert "`'low' | 'medium' | 'high'`" in risk  # an enum as its values, pipes kept in code


def test_the_jobs_overview_and_nav_list_every_registered_job(hooks: None) -> None:
    import job_pages

    index = job_pages.jobs_index()
    for d in definitions():
        assert f"| [{d.name}]({d.name}.md) | {d.summary}" in index


def test_readme_links_are_made_relative_to_the_including_page(hooks: None) -> None:
    import readme_parts

    assert readme_parts._relative("docs/screenshots/ui-queue.png", "") == "screenshots/ui-queue.png"
    assert readme_parts._relative("docs/evaluation.md", "jobs") == "../evaluation.md"
    assert readme_parts._relative("examples/x.py", "") == "examples/x.py"


# ---------------------------------------------------------------------------- strict builds


@pytest.mark.slow
def test_the_site_builds_strict_and_offline(tmp_path: Path) -> None:
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    for name in job_names():
        html = (site / "jobs" / name / "index.html").read_text(encoding="utf-8")
        assert "Worked example" in html and "Review payload" in html
        assert 'class="language-python' in html or "highlight" in html  # the README's code
    tier = (site / "jobs" / "tier" / "index.html").read_text(encoding="utf-8")
    assert "--batch-size" in tier and "review_sample_rate" in tier
    ui = (site / "ui" / "index.html").read_text(encoding="utf-8")
    assert 'src="../screenshots/ui-queue.png"' in ui  # the README's image, linked from the page
    assert (site / "screenshots" / "ui-queue.png").exists()
    reference = (site / "reference" / "evidex.jobs" / "index.html").read_text(encoding="utf-8")
    assert "definitions" in reference and ":class:" not in reference
    assert (site / "examples" / "langchain_rerank.py").exists()  # a README link's target
    testing = (site / "testing" / "index.html").read_text(encoding="utf-8")
    assert "assert_grounded" in testing and "--evidex-judge" in testing  # the README's part
    evaluate = (site / "evaluate" / "index.html").read_text(encoding="utf-8")
    assert "evidex eval compare" in evaluate and "paired" in evaluate  # run against run
    evaluation = (site / "evaluation" / "index.html").read_text(encoding="utf-8")
    assert 'id="run-against-run"' in evaluation


@pytest.mark.slow
def test_strict_fails_on_a_broken_link(tmp_path: Path) -> None:
    copy = _copy_of_the_site(tmp_path)
    page = copy / "docs" / "judges.md"
    page.write_text(page.read_text() + "\nSee [the old page](gone.md).\n", encoding="utf-8")
    done = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "gone.md" in done.stderr and "strict" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('--8<-- "README.md:no-such-part"', "no-such-part"),
        ("::: evidex.no_such_module", "evidex.no_such_module"),
    ],
)
def test_strict_fails_on_a_missing_readme_part_or_reference(
    tmp_path: Path, line: str, named: str
) -> None:
    copy = _copy_of_the_site(tmp_path)
    page = copy / "docs" / "index.md"
    page.write_text(page.read_text() + f"\n{line}\n", encoding="utf-8")
    done = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert named in done.stderr


@pytest.mark.slow
@pytest.mark.network
def test_the_screenshot_script_shoots_the_ui_of_a_real_service(tmp_path: Path) -> None:
    """docs/screenshots.py as the docs use it: a real `evidex serve`, Chromium, three PNGs."""
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("no Chromium at /usr/bin/chromium (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "screenshots.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "EVIDEX_DB": str(tmp_path / "unused.db")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("ui-queue", "ui-item", "ui-agreement"):
        shot = (tmp_path / f"{name}.png").read_bytes()
        assert shot.startswith(b"\x89PNG") and len(shot) > 20_000, name
