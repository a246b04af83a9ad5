"""Output that reads at 80 columns, and progress measured by the run.

Every command that prints a table is run at ``COLUMNS=80``: no line is wider, and no word is
split across lines ("directly-suppo" / "rting", "kappa_lin" / "ear"); a table whose longest
words do not fit side by side is printed as records. Progress lines give counts, the rate and
the time left from the run's own clock (a fake clock here), never a figure remembered from
another run.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from evidex.cli import main
from evidex.cli._demo_types import StepNote
from evidex.cli._demo_view import StepProgress
from evidex.cli._progress import progress, rate_line
from evidex.cli._tables import print_table
from tests.scripted import tier_reply
from tests.test_demo import as_author

ROOT = Path(__file__).resolve().parent.parent
TIERS = ("directly-supporting", "contextually-relevant", "tangentially-related", "irrelevant")
LEVELS = ("fully_supported", "inferred", "unsupported")
_BOX = "│┃╭╮╰╯─━┏┓┗┛┡┩┣┫╇╈┳┻╋┼├┤┬┴└┘┌┐═║"


_RUN_ID = re.compile(r"[0-9a-f]{12}|[0-9.]+")


def _no_bars(text: str) -> str:
    """The output without its progress bars (each run measures its own rate)."""
    return "\n".join(line for line in text.splitlines() if "━━" not in line)


def _tokens(text: str) -> list[str]:
    """The words of an output, run ids and numbers aside (each run has its own ids and
    timings)."""
    words = (t.strip(".,;:()[]'\"") for t in re.split(rf"[\s{_BOX}]+", text))
    return [w for w in words if w and not _RUN_ID.fullmatch(w)]


def assert_reads_at_80(out: str, wide: str, words: Iterable[str] = ()) -> None:
    """``out``, printed at 80 columns, has no line over 80 and no word that ``wide`` (the
    same output at 200 columns, where nothing needs wrapping) does not have: a word split
    across lines would leave its pieces ("kappa_lin", "ear"). Each of ``words`` is shown
    whole."""
    over = [line for line in out.splitlines() if len(line) > 80]
    assert not over, over
    tokens = set(_tokens(_no_bars(out)))
    pieces = tokens - set(_tokens(_no_bars(wide)))
    assert not pieces, f"words split at 80 columns: {sorted(pieces)}"
    missing = set(words) - tokens
    assert not missing, f"not shown whole: {missing}"


@pytest.fixture
def at_80(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str, columns: int = 80) -> tuple[str, str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(columns))
        code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def _both(
    capsys: pytest.CaptureFixture[str], *argv: str, wide: int = 200
) -> tuple[str, str, str, str]:
    """A command's stdout and stderr at 80 columns, then at ``wide``."""
    return (*_run(capsys, *argv), *_run(capsys, *argv, columns=wide))


# ---------------------------------------------------------------------------- tables


def test_a_table_too_wide_for_its_words_is_printed_as_records() -> None:
    table = Table(title="against the baseline")
    table.add_column("gate")
    table.add_column("metric", overflow="fold")
    for name in ("baseline", "value", "change", "95% interval", "result"):
        table.add_column(name, no_wrap=True)
    row = ("tier on the example golden set", "kappa_linear", "0.3", "0.3", "+0", "+0 to +0", "ok")
    table.add_row(*row)
    narrow, wide = io.StringIO(), io.StringIO()
    print_table(Console(file=narrow, width=60), table)
    print_table(Console(file=wide, width=200), table)
    assert "metric: kappa_linear" in narrow.getvalue()
    assert "95% interval: +0 to +0" in narrow.getvalue()
    assert "┃ metric" in wide.getvalue() and "kappa_linear" in wide.getvalue()
    assert_reads_at_80(narrow.getvalue(), wide.getvalue(), ["kappa_linear"])
    folded = io.StringIO()  # what rich alone prints at 60 columns: the word folded
    Console(file=folded, width=60).print(table)
    with pytest.raises(AssertionError, match="split"):
        assert_reads_at_80(folded.getvalue(), wide.getvalue())


def test_the_demo_reads_at_80_columns(
    at_80: Path, capsys: pytest.CaptureFixture[str], scripted: Callable[..., Any]
) -> None:
    scripted(*[as_author()] * 20)
    # the demo stacks its text columns below 120 columns: its words are those it shows at 119
    out, err, wide, _ = _both(capsys, "demo", "--judge", "scripted", wide=119)
    assert_reads_at_80(out, wide, [*TIERS, *LEVELS, "k8s-termination", "termination-mirror"])
    assert all(len(line) <= 80 for line in err.splitlines())


def test_the_review_queue_the_audit_log_and_the_keys_read_at_80_columns(
    at_80: Path, capsys: pytest.CaptureFixture[str], scripted: Callable[..., Any]
) -> None:
    scripted(tier_reply)
    rows = [
        {"passage_id": "k8s-termination-grace-period", "text": "Pods get 30 seconds to stop."},
        {"passage_id": "docker-stop-timeout", "text": "docker stop waits 10 seconds."},
    ]
    passages = at_80 / "p.jsonl"
    passages.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _run(capsys, "tier", "-q", "grace", "-p", str(passages), "-j", "scripted", "--risk", "high")
    out, _, wide, _ = _both(capsys, "review", "list")
    assert_reads_at_80(out, wide, ["k8s-termination-grace-period", "docker-stop-timeout"])
    out, _, wide, _ = _both(capsys, "review", "show", "1")
    # the fields; the payload after them is JSON as stored (rich prints it unwrapped)
    fields, wide_fields = out.split("payload:")[0], wide.split("payload:")[0]
    assert_reads_at_80(fields, wide_fields, ["k8s-termination-grace-period"])
    out, _, wide, _ = _both(capsys, "log", "--last", "5")
    caption = "not shown at this width: step, prompt, latency, tokens (see --json)"
    assert caption in out  # the columns it leaves out below 120, said
    assert_reads_at_80(out, wide + caption, ["scripted"])
    _run(capsys, "keys", "create", "--role", "reviewer", "--name", "rag-api-production-reviewers")
    out, _, wide, _ = _both(capsys, "keys", "list")
    assert_reads_at_80(out, wide, ["rag-api-production-reviewers", "reviewer"])


def _golden(folder: Path) -> str:
    """A small tier golden set of the committed example (its tiers assigned in turn) and a
    gates file over it; the golden set's file name."""
    query = (ROOT / "examples" / "tier" / "query.txt").read_text().strip()
    lines = (ROOT / "examples" / "tier" / "passages.jsonl").read_text().splitlines()
    rows = [
        {"query_id": "q1", "query": query, **json.loads(line), "tier": TIERS[i % len(TIERS)]}
        for i, line in enumerate(lines)
    ]
    (folder / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "gates.toml").write_text(
        '[[gate]]\nname = "tier on the example golden set"\njob = "tier"\n'
        'golden = "golden.jsonl"\njudge = "local:minilm"\n'
        "floors = { accuracy = 0.0, kappa_linear = -1.0 }\n"
    )
    return "golden.jsonl"


def test_calibration_and_gates_read_at_80_columns(
    at_80: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the real encoder on a small golden set of the example passages (seconds)."""
    golden = _golden(at_80)
    _, err, _, wide = _both(capsys, "calibrate", "tier", "--golden", golden, "-j", "local:minilm")
    assert_reads_at_80(err, wide, ["directly-supporting", "contextually-relevant"])
    _run(capsys, "eval", "tier", "--golden", golden, "-j", "local:minilm", "-o", "today")
    out, _, wide, _ = _both(capsys, "gate", "--config", "gates.toml", "--baseline", "today")
    assert_reads_at_80(out, wide, ["kappa_linear", "accuracy"])
    _, err, _, wide = _both(capsys, "eval", "compare", "today", "today", "-o", "compare.md")
    assert_reads_at_80(err, wide, ["kappa_quadratic", "accuracy"])


# ---------------------------------------------------------------------------- progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_line_is_measured_by_the_run() -> None:
    assert rate_line(0, 10, 4.0, "batches") == "0/10 batches · 4.0 s so far"
    assert rate_line(2, 10, 8.0, "batches") == "2/10 batches · 4.0 s/batch · about 32 s left"
    assert rate_line(30, 100, 3.0, "tasks") == "30/100 tasks · 10.0 tasks/s · about 7.0 s left"
    assert rate_line(5, 5, 610.0, "calls") == "5/5 calls · 122.0 s/call"
    assert rate_line(3, 4, 30.0, "queries") == "3/4 queries · 10.0 s/query · about 10 s left"
    assert (
        rate_line(1, 40, 95.0, "answers") == "1/40 answers · 95.0 s/answer · about 1 h 02 min left"
    )


def test_a_job_commands_progress_bar_counts_and_times_from_its_clock() -> None:
    clock, screen = FakeClock(), io.StringIO()
    console = Console(file=screen, width=80, force_terminal=True)
    with progress(4, "tier", "batches", clock=clock, console=console) as update:
        assert update is not None
        clock.now += 6.0
        update(1, 4)
        clock.now += 6.0
        update(2, 4)
        shown = screen.getvalue()
        clock.now += 12.0
        update(4, 4)
    final = screen.getvalue()
    assert "2/4 batches · 6.0 s/batch · about 12 s left" in shown
    assert "4/4 batches · 6.0 s/batch" in final
    assert "measured on" not in final and "when measured" not in final


def test_bulk_progress_gives_the_runs_rate() -> None:
    from evidex.bulk import BulkStats
    from evidex.cli.bulk import bulk_progress

    clock, screen = FakeClock(), io.StringIO()
    console = Console(file=screen, width=120, force_terminal=True)
    out, errors = Path("out.jsonl"), Path("out.errors.jsonl")
    # 50 of 200 tasks done 20 s into the run, by the run's own clock
    stats = BulkStats(output=out, errors_path=errors, total=200, started=0.0, finished=20.0)
    stats.done = 50
    with bulk_progress("bulk tier", clock=clock, console=console) as update:
        update(stats)
    assert "50/200 tasks · 2.5 tasks/s · about 1 min 00 s left" in screen.getvalue()


def test_the_demos_step_line_gives_live_counts_not_remembered_seconds() -> None:
    clock, screen = FakeClock(), io.StringIO()
    console = Console(file=screen, width=100, force_terminal=True)
    with StepProgress(console, clock=clock) as steps:
        steps.note(StepNote(step="audit", status="start", index=5, of=6, judge_id="local:qwen"))
        steps.note(
            StepNote(step="audit", status="progress", index=5, of=6, done=1, total=3, seconds=20.0)
        )
        live = screen.getvalue()
        steps.note(StepNote(step="audit", status="done", index=5, of=6, seconds=61.0))
    assert "audit: 1/3 calls · 20.0 s/call · about 40 s left" in live
    assert "[5/6] audit done in 61.0 s" in screen.getvalue()


def test_no_progress_message_quotes_a_remembered_timing() -> None:
    """No step declares seconds measured once (``measured_s``), and no command tells a user
    how long something took "when measured on 2 cores" (docstrings that cite a benchmark to
    explain a default are not messages)."""
    src = ROOT / "src" / "evidex"
    declared = [p for p in src.rglob("*.py") if "measured_s" in p.read_text()]
    assert not declared, declared
    said = re.compile(r"when measured on|measured on \d+ (busy )?cores|min when measured")
    told = [p for p in (src / "cli").rglob("*.py") if said.search(p.read_text())]
    assert not told, told
