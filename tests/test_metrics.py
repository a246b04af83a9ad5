"""Evaluation arithmetic: hand fixtures with the expected value written as arithmetic, and
cross-checks against scikit-learn and ir-measures (pytrec_eval) on the same inputs."""

from __future__ import annotations

import math
import random

import ir_measures
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score
from sklearn.metrics import confusion_matrix as sk_confusion

from evidex.errors import ConfigError, InputError
from evidex.evaluate import metrics as m
from evidex.evaluate.measures import parse_measure

TIERS = ["directly-supporting", "contextually-relevant", "tangentially-related", "irrelevant"]

# ---------------------------------------------------------------------- kappa by hand


def test_plain_kappa_by_hand() -> None:
    # observed agreement 3/4; marginals gold (1/2, 1/2), judge (1/4, 3/4)
    po = 3 / 4
    pe = (1 / 2) * (1 / 4) + (1 / 2) * (3 / 4)
    assert m.cohen_kappa(["a", "a", "b", "b"], ["a", "b", "b", "b"], ["a", "b"]) == pytest.approx(
        (po - pe) / (1 - pe)
    )


def test_linear_and_quadratic_kappa_by_hand() -> None:
    gold, pred, labels = ["x", "y", "z", "z"], ["y", "y", "z", "x"], ["x", "y", "z"]
    # disagreements: (x→y) one step of two, (z→x) two steps of two
    observed_lin = (1 / 2 + 0 + 0 + 1) / 4
    observed_quad = ((1 / 2) ** 2 + 1**2) / 4
    g, p = [1 / 4, 1 / 4, 1 / 2], [1 / 4, 1 / 2, 1 / 4]
    expected_lin = sum(g[i] * p[j] * abs(i - j) / 2 for i in range(3) for j in range(3))
    expected_quad = sum(g[i] * p[j] * ((i - j) / 2) ** 2 for i in range(3) for j in range(3))
    assert m.cohen_kappa(gold, pred, labels, "linear") == pytest.approx(
        1 - observed_lin / expected_lin
    )
    assert m.cohen_kappa(gold, pred, labels, "quadratic") == pytest.approx(
        1 - observed_quad / expected_quad
    )


def test_binary_kappa_cuts_the_order_at_the_boundary() -> None:
    gold = ["directly-supporting", "contextually-relevant", "irrelevant", "tangentially-related"]
    pred = ["contextually-relevant", "directly-supporting", "tangentially-related", "irrelevant"]
    # at contextually-relevant every item lands on the same side: perfect agreement
    assert m.binary_kappa(gold, pred, TIERS, "contextually-relevant") == pytest.approx(1.0)
    # at the top tier: gold pos,neg,neg,neg vs judge neg,pos,neg,neg
    po, pe = 2 / 4, (1 / 4) * (1 / 4) + (3 / 4) * (3 / 4)
    assert m.binary_kappa(gold, pred, TIERS, "directly-supporting") == pytest.approx(
        (po - pe) / (1 - pe)
    )
    with pytest.raises(InputError, match="last label"):
        m.binary_kappa(gold, pred, TIERS, "irrelevant")


def test_kappa_is_nan_when_a_single_label_is_used_by_both() -> None:
    assert math.isnan(m.cohen_kappa(["a", "a"], ["a", "a"], ["a", "b"]))
    # one rater varies: defined (and 0: no agreement beyond chance)
    assert m.cohen_kappa(["a", "a"], ["a", "b"], ["a", "b"]) == pytest.approx(0.0)


def test_unknown_labels_and_length_mismatch_are_input_errors() -> None:
    with pytest.raises(InputError, match="not among the known labels"):
        m.cohen_kappa(["a", "c"], ["a", "a"], ["a", "b"])
    with pytest.raises(InputError, match="differ in length"):
        m.accuracy(["a"], ["a", "b"])


def test_confusion_accuracy_macro_f1_by_hand() -> None:
    gold, pred = ["a", "a", "b", "c"], ["a", "b", "b", "b"]
    assert m.confusion_matrix(gold, pred, ["a", "b", "c"]).tolist() == [
        [1, 1, 0],
        [0, 1, 0],
        [0, 1, 0],
    ]
    assert m.accuracy(gold, pred) == pytest.approx(2 / 4)
    f1_a = 2 * 1 * (1 / 2) / (1 + 1 / 2)  # precision 1/1, recall 1/2
    f1_b = 2 * (1 / 3) * 1 / (1 / 3 + 1)  # precision 1/3, recall 1/1
    f1_c = 0.0
    assert m.macro_f1(gold, pred) == pytest.approx((f1_a + f1_b + f1_c) / 3)


def test_boundary_confusions_locate_adjacent_disagreements() -> None:
    gold = ["a", "a", "b", "c", "c"]
    pred = ["b", "a", "a", "a", "c"]
    found = m.boundary_confusions(m.confusion_matrix(gold, pred, ["a", "b", "c"]), ["a", "b", "c"])
    assert found["disagreements"] == 3
    assert found["adjacent"][0] == {
        "boundary": "a / b",
        "down": 1,
        "up": 1,
        "total": 2,
        "share": 2 / 3,
    }
    assert found["adjacent"][1]["total"] == 0
    assert found["far"] == 1  # c judged a: two steps


# ---------------------------------------------------------------------- against scikit-learn


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_matches_scikit_learn(weights: m.Weights) -> None:
    rng = random.Random(7)
    gold = [rng.choice(TIERS) for _ in range(200)]
    pred = [g if rng.random() < 0.6 else rng.choice(TIERS) for g in gold]
    expected = cohen_kappa_score(gold, pred, labels=TIERS, weights=weights)
    assert m.cohen_kappa(gold, pred, TIERS, weights) == pytest.approx(expected)


def test_confusion_and_macro_f1_match_scikit_learn() -> None:
    rng = random.Random(3)
    gold = [rng.choice(TIERS[:3]) for _ in range(150)]
    pred = [g if rng.random() < 0.5 else rng.choice(TIERS) for g in gold]
    assert (
        m.confusion_matrix(gold, pred, TIERS).tolist()
        == sk_confusion(gold, pred, labels=TIERS).tolist()
    )
    assert m.macro_f1(gold, pred) == pytest.approx(
        f1_score(gold, pred, average="macro", zero_division=0)
    )
    per = m.per_label_agreement(gold, pred, TIERS)
    sk = f1_score(gold, pred, labels=TIERS, average=None, zero_division=0)
    assert [per[t].f1 for t in TIERS] == pytest.approx(list(sk))


# ---------------------------------------------------------------------- ranking by hand

GRADES = {"a": 3, "b": 0, "c": 1, "d": 2}


def test_ndcg_linear_and_exponential_by_hand() -> None:
    log2 = math.log2
    dcg = 0 / log2(2) + 3 / log2(3) + 1 / log2(4)
    ideal = 3 / log2(2) + 2 / log2(3) + 1 / log2(4)
    assert m.ndcg_at_k(["b", "a", "c"], GRADES, 3) == pytest.approx(dcg / ideal)
    dcg_exp = 0 + (2**3 - 1) / log2(3) + (2**1 - 1) / log2(4)
    ideal_exp = (2**3 - 1) + (2**2 - 1) / log2(3) + (2**1 - 1) / log2(4)
    assert m.ndcg_at_k(["b", "a", "c"], GRADES, 3, "exponential") == pytest.approx(
        dcg_exp / ideal_exp
    )


def test_k_beyond_the_list_and_no_relevant_documents() -> None:
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert m.ndcg_at_k(["a"], GRADES, 10) == pytest.approx(3 / ideal)
    assert m.precision_at_k(["a", "d"], GRADES, 10) == pytest.approx(2 / 10)  # divides by k
    assert m.ndcg_at_k(["x", "y"], {"x": 0}, 10) == 0.0
    assert m.reciprocal_rank(["x", "y"], {"x": 0}) == 0.0
    assert m.precision_at_k([], {"x": 0}, 5) == 0.0


def test_precision_rr_with_a_relevance_threshold() -> None:
    ranking = ["b", "c", "d", "a"]
    assert m.precision_at_k(ranking, GRADES, 2, rel=2) == 0.0
    assert m.precision_at_k(ranking, GRADES, 4, rel=2) == pytest.approx(2 / 4)
    assert m.reciprocal_rank(ranking, GRADES) == pytest.approx(1 / 2)
    assert m.reciprocal_rank(ranking, GRADES, rel=2) == pytest.approx(1 / 3)
    assert m.mrr({"q1": ranking, "q2": ["z"]}, {"q1": GRADES, "q2": {"y": 1}}) == pytest.approx(
        (1 / 2 + 0) / 2
    )


def test_ties_break_by_document_id_descending_like_trec_eval() -> None:
    assert m.rank_by_scores({"a": 1.0, "b": 1.0, "c": 2.0, "e": 1.0}) == ["c", "e", "b", "a"]


def test_bad_cutoff_and_gain_are_rejected() -> None:
    with pytest.raises(InputError):
        m.ndcg_at_k(["a"], GRADES, 0)
    with pytest.raises(ValueError, match="gain"):
        m.ndcg_at_k(["a"], GRADES, 3, "cubic")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- against ir-measures


def _ranking_fixture() -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rng = random.Random(11)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(12):
        docs = [f"d{q}_{i}" for i in range(25)]
        qrels[f"q{q}"] = {d: rng.choice([0, 0, 0, 1, 2, 3]) for d in rng.sample(docs, 15)}
        # rounded scores make ties; some retrieved docs are unjudged
        run[f"q{q}"] = {d: round(rng.random(), 1) for d in rng.sample(docs, 18)}
    qrels["q_none"] = {"x1": 0, "x2": 0}  # a query without a relevant document
    run["q_none"] = {"x1": 0.5, "x3": 0.4}
    return qrels, run


def test_ranking_measures_match_ir_measures() -> None:
    qrels, run = _ranking_fixture()
    measures = [
        ir_measures.nDCG @ 10,
        ir_measures.nDCG @ 30,
        ir_measures.P @ 10,
        ir_measures.P(rel=2) @ 10,
        ir_measures.RR,
        ir_measures.RR(rel=2),
    ]
    expected = {str(k): v for k, v in ir_measures.calc_aggregate(measures, qrels, run).items()}
    rankings = {q: m.rank_by_scores(scores) for q, scores in run.items()}

    def mean(values: list[float]) -> float:
        return float(np.mean(values))

    ours = {
        "nDCG@10": mean([m.ndcg_at_k(rankings[q], qrels[q], 10) for q in qrels]),
        "nDCG@30": mean([m.ndcg_at_k(rankings[q], qrels[q], 30) for q in qrels]),
        "P@10": mean([m.precision_at_k(rankings[q], qrels[q], 10) for q in qrels]),
        "P(rel=2)@10": mean([m.precision_at_k(rankings[q], qrels[q], 10, rel=2) for q in qrels]),
        "RR": m.mrr(rankings, qrels),
        "RR(rel=2)": m.mrr(rankings, qrels, rel=2),
    }
    assert ours == pytest.approx(expected)


# ---------------------------------------------------------------------- citations and claims


def test_citation_precision_recall_micro_and_macro_by_hand() -> None:
    gold = [{"a", "b"}, {"c"}, set()]
    pred = [{"a"}, {"c", "d"}, {"e"}]
    got = m.citation_scores(gold, pred)
    assert got["precision_micro"] == pytest.approx((1 + 1 + 0) / (1 + 2 + 1))
    assert got["recall_micro"] == pytest.approx((1 + 1) / (2 + 1))
    assert got["precision_macro"] == pytest.approx((1 / 1 + 1 / 2 + 0 / 1) / 3)
    assert got["recall_macro"] == pytest.approx((1 / 2 + 1 / 1) / 2)  # empty gold left out


def test_citation_scores_with_nothing_predicted() -> None:
    got = m.citation_scores([{"a"}], [set()])
    assert math.isnan(got["precision_micro"]) and math.isnan(got["precision_macro"])
    assert got["recall_micro"] == 0.0


def test_claim_f1_by_hand() -> None:
    gold = [("A b.", "fully_supported"), ("C.", "unsupported")]
    pred = [("a  B.", "fully_supported"), ("C.", "inferred"), ("D.", "fully_supported")]
    with_label = m.claim_f1(gold, pred)
    p, r = 1 / 3, 1 / 2
    assert (with_label.precision, with_label.recall) == pytest.approx((p, r))
    assert with_label.f1 == pytest.approx(2 * p * r / (p + r))
    text_only = m.claim_f1(gold, pred, with_label=False)
    assert text_only.f1 == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))


# ---------------------------------------------------------------------- bootstrap


def test_bootstrap_is_seeded_and_brackets_the_value() -> None:
    rng = random.Random(5)
    pairs = [(g, g if rng.random() < 0.7 else rng.choice(TIERS)) for g in TIERS * 25]

    def kappa(sample: list[tuple[str, str]]) -> float:
        return m.cohen_kappa([g for g, _ in sample], [p for _, p in sample], TIERS)

    first = m.bootstrap_ci(pairs, kappa, samples=300, seed=1)
    again = m.bootstrap_ci(pairs, kappa, samples=300, seed=1)
    other = m.bootstrap_ci(pairs, kappa, samples=300, seed=2)
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)
    assert first.low < first.value < first.high
    assert first.samples == 300


def test_several_figures_share_resamples_and_equal_their_single_intervals() -> None:
    rng = random.Random(7)
    pairs = [(g, g if rng.random() < 0.6 else rng.choice(TIERS)) for g in TIERS * 10]

    def kappa(sample: list[tuple[str, str]]) -> float:
        return m.cohen_kappa([g for g, _ in sample], [p for _, p in sample], TIERS)

    def accuracy(sample: list[tuple[str, str]]) -> float:
        return m.accuracy([g for g, _ in sample], [p for _, p in sample])

    both = m.bootstrap_cis(
        pairs, lambda s: {"kappa": kappa(s), "accuracy": accuracy(s)}, samples=200, seed=4
    )
    assert both["kappa"] == m.bootstrap_ci(pairs, kappa, samples=200, seed=4)
    assert both["accuracy"] == m.bootstrap_ci(pairs, accuracy, samples=200, seed=4)


def test_the_matrix_forms_equal_the_list_forms() -> None:
    rng = random.Random(11)
    gold = [rng.choice(TIERS[:3]) for _ in range(60)]  # one tier never golden
    pred = [rng.choice(TIERS) for _ in range(60)]
    matrix = m.confusion_matrix(gold, pred, TIERS)
    assert m.accuracy_from_matrix(matrix) == m.accuracy(gold, pred)
    assert m.macro_f1_from_matrix(matrix, TIERS) == m.macro_f1(gold, pred)
    for boundary in TIERS[:-1]:
        binary = m.kappa_from_matrix(m.collapse_at(matrix, TIERS, boundary))
        positive = set(TIERS[: TIERS.index(boundary) + 1])
        expected = cohen_kappa_score([g in positive for g in gold], [p in positive for p in pred])
        assert binary == pytest.approx(expected)
    assert math.isnan(m.accuracy_from_matrix(np.zeros((4, 4), dtype=np.int64)))
    assert math.isnan(m.macro_f1_from_matrix(np.zeros((4, 4), dtype=np.int64), TIERS))


def test_bootstrap_of_an_undefined_statistic_has_no_bounds() -> None:
    pairs = [("a", "a")] * 10

    def kappa(sample: list[tuple[str, str]]) -> float:
        return m.cohen_kappa([g for g, _ in sample], [p for _, p in sample], ["a", "b"])

    interval = m.bootstrap_ci(pairs, kappa, samples=50)
    assert math.isnan(interval.value) and math.isnan(interval.low) and interval.samples == 0


# ---------------------------------------------------------------------- measures


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("nDCG@10", "nDCG@10"),
        ("nDCG(gain=linear)@10", "nDCG@10"),
        ("nDCG(gain=exponential)@5", "nDCG(gain=exponential)@5"),
        ("P(rel=2)@10", "P(rel=2)@10"),
        ("P(rel=1)@10", "P@10"),
        ("RR", "RR"),
        ("kappa", "kappa"),
        ("kappa_linear", "kappa_linear"),
        (
            "kappa_binary(boundary=contextually-relevant)",
            "kappa_binary(boundary=contextually-relevant)",
        ),
        ("citation_precision(avg=macro)", "citation_precision(avg=macro)"),
    ],
)
def test_measures_parse_to_canonical_strings(text: str, canonical: str) -> None:
    measure = parse_measure(text)
    assert str(measure) == canonical
    assert parse_measure(canonical) == parse_measure(str(measure))


def test_measure_parameters_have_defaults() -> None:
    assert parse_measure("nDCG@10").param("gain") == "linear"
    assert parse_measure("P(rel=2)@5").param("rel") == "2"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ndcg@10", "unknown measure"),
        ("kappa@5", "takes no @cutoff"),
        ("nDCG", "needs a positive @cutoff"),
        ("P(foo=1)@5", "has no parameter"),
        ("nDCG(gain=cubic)@10", "must be one of"),
        ("P(rel=high)@10", "integer grade"),
        ("kappa_binary", "needs a boundary"),
        ("nDCG@@10", "cannot parse"),
    ],
)
def test_bad_measures_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_measure(text)
