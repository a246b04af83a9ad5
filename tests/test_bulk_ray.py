"""``evidex bulk --engine ray``: Ray in local mode with 2 CPUs and 2 actors, each with its own
``local:minilm`` judge and store connection. The output equals the local engine's on the same
input (compared by id: the local engine writes in completion order, the Ray engine in input
order), bad lines go to the errors file with their line numbers, and a resumed run skips the
ids already in the output."""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from evidex.bulk import run_bulk  # noqa: E402
from evidex.bulk.ray_engine import import_ray  # noqa: E402
from evidex.cli import main  # noqa: E402
from evidex.errors import ConfigError, MissingExtraError  # noqa: E402

QUERIES = [
    "how do vaccines train the immune system",
    "what causes ocean tides",
    "why is the sky blue",
]
POOL = [
    "Vaccines expose the immune system to a harmless antigen so it learns to make antibodies.",
    "Memory B cells formed after vaccination respond quickly to a later infection.",
    "The Moon's gravity pulls on the oceans, raising two bulges of water that cause tides.",
    "Spring tides happen when the Sun and the Moon line up.",
    "Sunlight is scattered by air molecules, and blue light is scattered the most.",
    "Rayleigh scattering is stronger for shorter wavelengths.",
    "The recipe calls for two cups of flour and a pinch of salt.",
    "The football match ended in a draw after extra time.",
    "Granite is an igneous rock made mostly of quartz and feldspar.",
]
TASKS = 30
BAD = ["not json", '{"query": "no id", "passages": []}', '{"id": "x", "passages": "no"}']
STABLE = ("id", "judge_id", "prompt_version", "query", "classifications", "tier_summary")
"""The fields that do not vary run to run (not the run id)."""


PICKS = list(itertools.combinations(range(len(POOL)), 4))[::4]
"""Four passages a task, a different four for every task: no two tasks are the same, so none
is answered from the cache of another (which one would be depends on timing)."""


def task(i: int) -> dict[str, Any]:
    picks = PICKS[i]
    return {
        "id": f"q{i}",
        "query": QUERIES[i % len(QUERIES)],
        "passages": [{"passage_id": f"p{k}", "text": POOL[j]} for k, j in enumerate(picks)],
    }


def write_input(path: Path) -> Path:
    lines = [json.dumps(task(i)) for i in range(TASKS)]
    for offset, bad in enumerate(BAD):
        lines.insert(5 + 10 * offset, bad)
    lines.insert(20, json.dumps(task(3)))  # a repeated id
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "the last line is torn"
    return [json.loads(line) for line in text.splitlines()]


def stable(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: {f: r[f] for f in STABLE} for r in rows(path)}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One local Ray for the module (2 CPUs, no dashboard, no usage stats): the engine joins
    a running Ray instead of starting its own."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("local_ray")
def test_the_ray_engine_writes_what_the_local_engine_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_input(tmp_path / "in.jsonl")
    common = ["-i", str(tasks), "-j", "local:minilm"]
    out_local, out_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    code, err = cli(
        capsys, "bulk", "tier", *common, "-o", str(out_local), "--db", f"sqlite:///{tmp_path}/l.db"
    )
    assert code == 0, err
    code, err = cli(
        capsys,
        *("bulk", "tier", *common, "-o", str(out_ray), "--db", f"sqlite:///{tmp_path}/r.db"),
        *("--engine", "ray", "--ray-workers", "2"),
    )
    assert code == 0, err
    assert f"{TASKS} done" in err and "4 line(s) could not be run" in err.replace("\n", " ")

    assert [r["id"] for r in rows(out_ray)] == [f"q{i}" for i in range(TASKS)]  # input order
    assert stable(out_ray) == stable(out_local)
    tiers = {c["tier"] for r in rows(out_ray) for c in r["classifications"]}
    assert len(tiers) > 1, "the fixture should give more than one tier"
    errors_ray = rows(tmp_path / "ray.errors.jsonl")
    assert errors_ray == sorted(rows(tmp_path / "local.errors.jsonl"), key=lambda e: e["line"])
    assert [e["line"] for e in errors_ray] == [6, 16, 21, 27]
    assert errors_ray[2]["kind"] == "duplicate" and errors_ray[2]["id"] == "q3"


@pytest.mark.slow
@pytest.mark.usefixtures("local_ray")
def test_a_resumed_ray_run_skips_the_ids_already_in_the_output(tmp_path: Path) -> None:
    tasks = write_input(tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    db = f"sqlite:///{tmp_path}/bulk.db"
    first = run_bulk("tier", tasks, out, judge="local:minilm", store=db, concurrency=2)
    assert first.done == TASKS
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(lines[:12]) + lines[12][:15], encoding="utf-8")  # and a torn line
    stats = run_bulk(
        "tier",
        tasks,
        out,
        judge="local:minilm",
        store=db,
        engine="ray",
        engine_options={"workers": 2},
    )
    assert (stats.skipped, stats.done, stats.errors) == (12, TASKS - 12, 4)
    assert stats.truncated_bytes > 0
    ids = [r["id"] for r in rows(out)]
    assert sorted(ids) == sorted(f"q{i}" for i in range(TASKS)) and len(set(ids)) == TASKS


def test_the_ray_engine_refuses_an_in_memory_store(tmp_path: Path) -> None:
    tasks = write_input(tmp_path / "in.jsonl")
    with pytest.raises(ConfigError, match="in-memory"):
        run_bulk(
            "tier", tasks, tmp_path / "o.jsonl", judge="local:minilm", store="sqlite://",
            engine="ray",
        )  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ray-workers", "2"], "go with --engine ray"),
        (["--engine", "ray", "--ray-workers", "0"], "ray-workers"),
    ],
)
def test_ray_flags_are_checked_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    tasks = write_input(tmp_path / "in.jsonl")
    out = tmp_path / "o.jsonl"
    code, err = cli(capsys, "bulk", "tier", "-i", str(tasks), "-o", str(out), *extra)
    assert code == 2 and message in err
    assert not out.exists()


def test_without_ray_the_engine_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'evidex\[ray\]'"):
        import_ray()
