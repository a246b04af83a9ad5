"""What a run spent: calls, attempts and tokens over every attempt on each result, the cost
from the price table the user configures (never a guessed one), the CLI's line on stderr and
the service's Prometheus counter."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import evidex
from evidex.config import load_settings
from evidex.errors import ConfigError, JudgeUnavailable
from evidex.harness.runner import HarnessSettings
from evidex.pricing import Price, estimate_cost
from evidex.store import SqlStore
from evidex.types import Passage, Usage
from tests.classify_fixtures import INPUT, PASSAGES, TAXONOMY, reply
from tests.scripted import ScriptedJudge, tier_reply
from tests.test_cli import run, squash, write_jsonl

QUERY = "how much vitamin D do adults need?"
PRICED = {"scripted": Price(input=0.15, output=0.60)}


def _settings(**kw: object) -> HarnessSettings:
    return HarnessSettings(backoff_s=0.0, **kw)  # type: ignore[arg-type]


def _broken(request: evidex.JudgeRequest) -> dict[str, object]:
    data = tier_reply(request)
    data["classifications"][0]["passage_id"] = "p999"
    return data


# ------------------------------------------------------------------------------- prices


def test_a_price_is_per_million_tokens_input_and_output_apart() -> None:
    price = Price(input=0.15, output=0.60)
    usage = Usage(prompt_tokens=2_000_000, completion_tokens=500_000)
    assert price.cost(usage) == 2 * 0.15 + 0.5 * 0.60
    assert estimate_cost({"openai:gpt-4o-mini": price}, "openai:gpt-4o-mini", usage) == 0.6


def test_an_unknown_model_has_no_cost_never_a_guess() -> None:
    usage = Usage(prompt_tokens=1000, completion_tokens=10)
    prices = {"openai:gpt-4o-mini": Price(input=0.15, output=0.60)}
    assert estimate_cost(prices, "openai:gpt-4o", usage) is None  # a near name is not it
    assert estimate_cost({}, "openai:gpt-4o-mini", usage) is None


def test_prices_load_from_the_file_and_the_environment_model_by_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[prices]\n"
        '"openai:gpt-4o-mini" = { input = 0.15, output = 0.60 }\n'
        '"openai:gpt-4o" = { input = 2.5, output = 10 }\n'
    )
    monkeypatch.setenv("EVIDEX_CONFIG", str(path))
    monkeypatch.setenv("EVIDEX_PRICES", json.dumps({"openai:gpt-4o": {"input": 2, "output": 8}}))
    settings = load_settings()
    assert settings.prices == {
        "openai:gpt-4o-mini": Price(input=0.15, output=0.60),
        "openai:gpt-4o": Price(input=2, output=8),
    }
    assert HarnessSettings.from_config(settings).prices == settings.prices
    explicit = load_settings(prices={"openai:gpt-4o": {"input": 1, "output": 1}})
    assert explicit.prices["openai:gpt-4o"] == Price(input=1, output=1)
    assert explicit.prices["openai:gpt-4o-mini"] == Price(input=0.15, output=0.60)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[prices]\n"m" = { input = -1, output = 1 }\n', "greater than or equal to 0"),
        ('[prices]\n"m" = { input = 1, output = 1, currency = "EUR" }\n', "currency"),
        ('[prices]\n"m" = { input = 1 }\n', "output"),
    ],
)
def test_a_bad_price_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, where: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("EVIDEX_CONFIG", str(path))
    with pytest.raises(ConfigError, match=where):
        load_settings()


def test_prices_that_are_not_json_are_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIDEX_PRICES", "openai:gpt-4o-mini=0.15")
    with pytest.raises(ConfigError, match="EVIDEX_PRICES"):
        load_settings()


# ------------------------------------------------------------------------------ results


def test_a_result_counts_every_attempt_and_prices_it(
    store: SqlStore, passages: list[Passage]
) -> None:
    judge = ScriptedJudge([_broken, tier_reply])  # 100 in / 20 out per reply
    result = evidex.tier(
        QUERY, passages, judge=judge, store=store, settings=_settings(prices=PRICED)
    )
    assert (result.judge_calls, result.attempts) == (2, 2)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (200, 40)
    assert result.cost == pytest.approx((200 * 0.15 + 40 * 0.60) / 1e6)
    assert result.report()["cost"] == result.cost


def test_an_unpriced_judge_leaves_the_cost_empty(store: SqlStore, passages: list[Passage]) -> None:
    result = evidex.tier(
        QUERY, passages, judge=ScriptedJudge([tier_reply]), store=store, settings=_settings()
    )
    assert result.usage.prompt_tokens == 100 and result.cost is None


def test_attempts_refused_by_an_open_breaker_are_attempts_not_calls(store: SqlStore) -> None:
    passages = [Passage(passage_id=f"b{i}", text=f"text {i}") for i in range(20)]
    judge = ScriptedJudge([JudgeUnavailable("down")] * 100)
    settings = _settings(breaker_threshold=3, breaker_cooldown_s=60, max_concurrency=1)
    result = evidex.tier(QUERY, passages, judge=judge, store=store, settings=settings, batch_size=5)
    # the first batch sends 3 attempts and opens the breaker; the other 3 are refused at once
    assert (result.judge_calls, result.attempts) == (3, 6)


def test_a_cache_hit_costs_nothing(store: SqlStore, passages: list[Passage]) -> None:
    settings = _settings(prices=PRICED)
    evidex.tier(QUERY, passages, judge=ScriptedJudge([tier_reply]), store=store, settings=settings)
    again = evidex.tier(QUERY, passages, judge=ScriptedJudge(), store=store, settings=settings)
    assert (again.judge_calls, again.attempts, again.cost) == (0, 0, 0.0)


def test_classify_results_carry_attempts_and_cost(store: SqlStore) -> None:
    judge = ScriptedJudge(["not JSON", reply()])
    result = evidex.classify(
        INPUT, PASSAGES, TAXONOMY, judge=judge, store=store, settings=_settings(prices=PRICED)
    )
    assert (result.judge_calls, result.attempts) == (2, 2)
    assert result.cost == pytest.approx((200 * 0.15 + 40 * 0.60) / 1e6)


# ---------------------------------------------------------------------------------- CLI


def test_the_cli_prints_what_the_run_spent_on_stderr(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[prices]\nscripted = { input = 0.15, output = 0.60 }\n")
    monkeypatch.setenv("EVIDEX_CONFIG", str(config))
    scripted(_broken, tier_reply)
    path = write_jsonl(tmp_path / "p.jsonl", [{"passage_id": "a", "text": "Vitamin D is made."}])
    code, out, err = run(capsys, "tier", "-q", "q", "-p", str(path), "-j", "scripted")
    assert code == 0, err
    assert json.loads(out)["attempts"] == 2  # stdout is the result alone
    cost = (200 * 0.15 + 40 * 0.60) / 1e6
    line = "scripted: 2 judge call(s), 2 attempt(s), tokens 200 in / 40 out"
    assert squash(f"{line}, est. cost {cost:.6f}") in squash(err)


def test_the_cli_leaves_the_cost_out_when_the_judge_is_not_priced(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    scripted: Callable[..., list[ScriptedJudge]],
) -> None:
    monkeypatch.setenv("EVIDEX_PRICES", '{"openai:gpt-4o-mini": {"input": 0.15, "output": 0.6}}')
    scripted(tier_reply)
    path = write_jsonl(tmp_path / "p.jsonl", [{"passage_id": "a", "text": "Vitamin D is made."}])
    code, _, err = run(capsys, "tier", "-q", "q", "-p", str(path), "-j", "scripted")
    assert code == 0, err
    assert squash("scripted: 1 judge call(s), 1 attempt(s), tokens 100 in / 20 out") in squash(err)
    assert "cost" not in err


# ------------------------------------------------------------------------------ service


def test_the_service_exports_the_cost_of_priced_judges(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from evidex.service import create_app

    monkeypatch.setenv("EVIDEX_PRICES", '{"scripted": {"input": 1.0, "output": 2.0}}')
    app = create_app(
        store,
        judges={"scripted": ScriptedJudge([_broken, tier_reply])},
        auth="off",
        allowed_hosts=["testserver"],
    )
    client = TestClient(app)
    passages = [{"passage_id": "a", "text": "Most adults need 600 IU of vitamin D a day."}]
    body = client.post(
        "/tier", json={"query": "vitamin D", "passages": passages, "judge": "scripted"}
    ).json()
    assert body["cost"] == pytest.approx((200 * 1.0 + 40 * 2.0) / 1e6)
    text = client.get("/metrics").text
    [line] = [x for x in text.splitlines() if x.startswith('evidex_cost_total{job="tier"')]
    assert 'judge="scripted"' in line
    assert float(line.split()[-1]) == pytest.approx(body["cost"])


# --------------------------------------------------------------------------------- bulk


def test_a_bulk_run_sums_attempts_and_cost_into_its_summary(tmp_path: Path) -> None:
    from evidex.bulk import run_bulk

    tasks = write_jsonl(
        tmp_path / "in.jsonl",
        [{"id": f"t{i}", "query": "q", "passages": [f"Passage {i} text."]} for i in range(3)],
    )
    judge = ScriptedJudge([_broken, tier_reply, tier_reply, tier_reply])
    stats = run_bulk(
        "tier",
        tasks,
        tmp_path / "out.jsonl",
        judge=judge,
        store=f"sqlite:///{tmp_path / 'bulk.db'}",
        settings=_settings(prices=PRICED, max_concurrency=1),
    )
    assert (stats.done, stats.calls, stats.attempts, stats.unpriced) == (3, 4, 4, 0)
    assert stats.cost == pytest.approx((400 * 0.15 + 80 * 0.60) / 1e6)
    summary = stats.summary()
    assert f"4 judge calls, 4 attempts, tokens 400+80, est. cost {stats.cost:.6f}" in summary

    unpriced = run_bulk(
        "tier",
        tasks,
        tmp_path / "out2.jsonl",
        judge=ScriptedJudge([tier_reply] * 3),
        store="sqlite://",
        settings=_settings(),
    )
    assert unpriced.unpriced == 3 and "cost" not in unpriced.summary()
