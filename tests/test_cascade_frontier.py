"""The frontier routing rule of a cascade: the budget holds, the budget goes where the
expensive judge keeps finding relevant passages, and the fit is measured out of set."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from evidex.evaluate.cascade_frontier import (
    RecordedPairs,
    fit_frontier,
    frontier_out_of_set,
    frontier_sent,
    query_split,
)
from evidex.frontier import FrontierRounds, FrontierRule


def oracle(
    relevant: Mapping[str, Sequence[bool]], asked: list[tuple[str, int]]
) -> Callable[[Mapping[str, Sequence[int]]], dict[str, list[bool]]]:
    """Verdicts read from ``relevant`` (per query, by position); records what was asked."""

    def verdicts(batch: Mapping[str, Sequence[int]]) -> dict[str, list[bool]]:
        asked.extend((q, p) for q, ps in batch.items() for p in ps)
        return {q: [relevant[q][p] for p in ps] for q, ps in batch.items()}

    return verdicts


def test_the_budget_goes_to_the_query_whose_frontier_is_relevant() -> None:
    # two queries of ten passages, scores falling with the position; in "rich" every passage
    # is relevant, in "poor" only the first
    scores = {q: [1.0 - i / 10 for i in range(10)] for q in ("rich", "poor")}
    relevant = {"rich": [True] * 10, "poor": [True] + [False] * 9}
    asked: list[tuple[str, int]] = []
    sent = frontier_sent(scores, oracle(relevant, asked), budget=0.5, start=0.2, step=0.1)
    # 20 passages, budget 10: 2 + 2 first, then the six left all go to "rich"
    assert sent == {"rich": [0, 1, 2, 3, 4, 5, 6, 7], "poor": [0, 1]}
    assert len(asked) == 10 == len(set(asked))  # each passage asked once, never over budget


def test_the_budget_is_never_exceeded_and_nothing_is_spent_on_barren_frontiers() -> None:
    scores = {f"q{i}": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3] for i in range(5)}
    everything = {q: [True] * 7 for q in scores}
    for budget in (0.1, 0.3, 0.5, 1.0):
        asked: list[tuple[str, int]] = []
        frontier_sent(scores, oracle(everything, asked), budget=budget, start=0.1, step=0.2)
        assert len(asked) <= budget * 35 + 1e-9
    nothing = {q: [False] * 7 for q in scores}
    asked = []
    sent = frontier_sent(scores, oracle(nothing, asked), budget=0.5, start=0.2, step=0.2)
    assert sum(map(len, sent.values())) == 5  # the first one of each, then no frontier yields
    with pytest.raises(ValueError, match="start <= budget"):
        frontier_sent(scores, oracle(nothing, []), budget=0.2, start=0.3, step=0.1)


def test_the_query_split_never_splits_a_query() -> None:
    groups = [f"q{i % 9}" for i in range(90)]
    first, second = query_split(groups, seed=3)
    assert first | second == set(groups) and not first & second
    assert abs(len(first) - len(second)) <= 1
    assert query_split(groups, seed=3) == (first, second)


def golden(queries: int = 8, per: int = 20) -> tuple[list[str], list[float], list[int], list[int]]:
    """Queries whose relevant share differs (0 = relevant, 3 = the lowest tier); the expensive
    judge is right, the score orders the relevant first."""
    groups, scores, expensive, gold = [], [], [], []
    for q in range(queries):
        relevant = 2 + 2 * q
        for i in range(per):
            groups.append(f"q{q}")
            scores.append(1.0 - i / per)
            label = 0 if i < relevant else 3
            expensive.append(label)
            gold.append(label)
    return groups, scores, expensive, gold


def test_fit_picks_start_and_step_on_its_own_items() -> None:
    pairs = RecordedPairs(*golden(), n_labels=4)
    fitted = fit_frontier(pairs, budget=0.6)
    assert fitted["share_sent"] <= 0.6 and fitted["kappa"] == pytest.approx(1.0)
    assert (fitted["start"], fitted["step"]) == (0.1, 0.02)  # the first of the best
    with pytest.raises(ValueError, match="budget"):
        fit_frontier(pairs, budget=0.05)


def test_the_fit_follows_the_expensive_judge_unless_told_to_follow_the_gold_labels() -> None:
    groups, scores, expensive, gold = golden()
    noisy_gold = [0 if i % 7 == 3 else g for i, g in enumerate(gold)]  # gold the rule can't see
    pairs = RecordedPairs(groups, scores, expensive, noisy_gold, 4)
    on_judge = fit_frontier(pairs, budget=0.6)
    assert on_judge["target"] == "expensive"
    assert on_judge["fitted"] == pytest.approx(1.0)  # the judge's labels are reproduced exactly
    assert on_judge["kappa"] < 1.0  # and kappa is still reported against the gold labels
    on_gold = fit_frontier(pairs, budget=0.6, target="gold")
    assert on_gold["target"] == "gold" and on_gold["fitted"] == pytest.approx(on_gold["kappa"])


def test_out_of_set_fits_on_one_half_and_measures_on_the_other() -> None:
    groups, scores, expensive, gold = golden()
    pairs = RecordedPairs(groups, scores, expensive, gold, 4)
    found = frontier_out_of_set(pairs, budget=0.6, samples=50)
    one, two = found["folds"]
    assert set(one["fit_queries"]) == set(two["measured_queries"])
    assert not set(one["fit_queries"]) & set(one["measured_queries"])
    for fold in (one, two):
        assert fold["share_sent"] <= 0.6 and fold["kappa_expensive"] == pytest.approx(1.0)
        low, high = fold["kappa_interval"]
        assert low <= fold["kappa"] <= high
    assert found["pooled"]["items"] == len(groups) and found["pooled"]["queries"] == 8


# ---------------------------------------------------------------------- the rounds themselves


def drive(
    rounds: FrontierRounds[str], relevant: Mapping[str, Sequence[bool]]
) -> list[dict[str, list[int]]]:
    """Run the rounds to the end over ``relevant``; the rounds asked, in order."""
    asked = [rounds.first()]
    while asked[-1]:
        for q, ps in asked[-1].items():
            rounds.record(q, [relevant[q][p] for p in ps])
        asked.append(rounds.next())
    return asked[:-1]


def test_a_wider_round_moves_several_frontiers_at_once() -> None:
    scores = {q: [1.0 - i / 10 for i in range(10)] for q in ("a", "b", "c")}
    relevant = {"a": [True] * 10, "b": [True] * 10, "c": [True, False] * 5}
    narrow = FrontierRounds(FrontierRule(budget=0.5, start=0.2, step=0.2), scores)
    wide = FrontierRounds(FrontierRule(budget=0.5, start=0.2, step=0.2, width=2), scores)
    one, two = drive(narrow, relevant), drive(wide, relevant)
    # after the first round every query yields; one frontier moves per round at width 1, two
    assert [sorted(r) for r in one[1:]] == [["a"], ["a"], ["a"], ["a"], ["b"]]
    assert [sorted(r) for r in two[1:]] == [["a", "b"], ["a", "b"], ["a"]]
    assert narrow.total == wide.total == 15 and narrow.stopped == wide.stopped == "budget spent"
    assert narrow.rounds == 6 and wide.rounds == 4


def test_passages_sent_outside_the_rule_count_in_its_budget() -> None:
    scores = {"q": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]}
    rounds = FrontierRounds(FrontierRule(budget=0.5, start=0.25, step=0.25), scores, sent_outside=4)
    drive(rounds, {"q": [True] * 8})
    # 12 passages, budget 6: 4 went without a score, so the rule sends 2
    assert rounds.passages == 12 and rounds.cap == 6 and rounds.sent == {"q": [0, 1]}
    assert rounds.total == 6 and rounds.share_sent == 0.5
    over = FrontierRounds(FrontierRule(budget=0.5, start=0.25, step=0.25), scores, sent_outside=9)
    assert drive(over, {"q": [True] * 8}) == [] and over.sent == {"q": []}


def test_a_dropped_query_frees_what_it_was_asked_and_the_rounds_say_why_they_ended() -> None:
    scores = {"a": [0.9, 0.8, 0.7, 0.6], "b": [0.9, 0.8, 0.7, 0.6]}
    rounds = FrontierRounds(FrontierRule(budget=1.0, start=0.25, step=0.25), scores)
    assert rounds.first() == {"a": [0], "b": [0]}
    rounds.record("a", [True])
    assert rounds.waiting == {"b"}
    with pytest.raises(ValueError, match="not over"):
        rounds.next()
    rounds.drop("b")
    assert rounds.total == 1 and rounds.next() == {"a": [1]}
    rounds.record("a", [False])
    assert rounds.next() == {} and rounds.stopped == "no frontier yields"
    everything = FrontierRounds(FrontierRule(budget=1.0, start=0.5, step=0.5), {"a": [0.5, 0.4]})
    drive(everything, {"a": [True, True]})
    assert everything.stopped == "every passage sent"
