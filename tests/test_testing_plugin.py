"""The pytest plugin ``evidex.testing``, run by pytest's own ``pytester``: suites that pass and
fail, what their failure messages show, the options, the cache that makes a rerun free, and
that loading the plugin costs a suite that does not use it nothing.

The suites run against a scripted judge registered by their conftest (:data:`CONFTEST`): it
grades by words in the texts (``600 IU`` answers the vitamin D question, ``calcium`` is
context, ``sunlight`` a mention, anything else irrelevant), splits an answer into its
sentences, finds claims about colds unsupported and 400 IU contradicted, and counts its calls
into a file when the run ends. One test runs the embedded ``local:minilm`` for real.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from evidex import judges

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = """
import json
import os
from pathlib import Path

from evidex import judges
from tests.audit_fixtures import contradicted, supported, unsupported
from tests.evalkit import AnsweringJudge
from tests.scripted import ScriptedJudge, rank_reply, tier_reply

DOSE = "Most adults need 600 IU (15 micrograms) of vitamin D a day."
WORDS = [
    ("600 IU", "directly-supporting"),
    ("calcium", "contextually-relevant"),
    ("sunlight", "tangentially-related"),
]
ORDER = [tier for _, tier in WORDS] + ["irrelevant"]


def tier_of(text):
    return next((tier for word, tier in WORDS if word in text), "irrelevant")


def grade(claim):
    if "colds" in claim:
        return unsupported(claim, explanation="No passage mentions colds.")
    if "400" in claim:
        return contradicted(
            claim, explanation="The passage gives 600 IU, not 400.", contradicting_quote=DOSE
        )
    return supported(claim, supporting_context_ids=["p1"], supporting_quotes=[DOSE])


def reply(request):
    payload = request.payload
    if request.step == "tier":
        grades = {
            p.passage_id: {
                "tier": tier_of(p.text),
                "justification": f"It is {tier_of(p.text)}: it says {p.text[:30]!r}.",
                "key_evidence_snippet": None if tier_of(p.text) == "irrelevant" else p.text[:20],
            }
            for p in payload.passages
        }
        return tier_reply(request, **grades)
    if request.step == "rerank":
        ranked = sorted(payload.passages, key=lambda p: ORDER.index(tier_of(p.text)))
        return rank_reply([p.passage_id for p in ranked])(request)
    if request.step == "audit":  # one pass: the answer's sentences are its claims
        sentences = [s.strip() + "." for s in payload.answer.split(".") if s.strip()]
        return {"answer_id": None, "claims": [grade(s) for s in sentences]}
    if request.step == "sufficiency":
        holding = [p for p in payload.passages if "600 IU" in p.text]
        if not holding:
            return {
                "sufficient": False,
                "confidence": 0.9,
                "supporting_passage_ids": [],
                "key_quotes": [],
                "missing": ["the daily dose for adults"],
            }
        pid = holding[0].passage_id
        return {
            "sufficient": True,
            "confidence": 0.6,
            "supporting_passage_ids": [pid],
            "key_quotes": [{"passage_id": pid, "quoted_text": DOSE}],
            "missing": [],
        }
    raise AssertionError(f"no scripted reply for step {request.step}")


class Counting(ScriptedJudge):
    def __init__(self, judge_id):
        super().__init__([])
        self.judge_id = judge_id

    async def complete(self, request):
        self.replies = [reply]
        return await super().complete(request)


BUILT = []


def build(spec, **options):
    BUILT.append(Counting(spec))
    return BUILT[-1]


judges.register_judge("scripted", build)
judges.register_judge("scripted-b", build)
judges.register_judge("broken", lambda spec, **options: AnsweringJudge("this is not JSON"))


def pytest_sessionfinish(session):
    path = os.environ.get("EVIDEX_CALLS_FILE")
    if path:
        calls = {}
        for judge in BUILT:  # one judge per job: calls summed by spec
            calls[judge.judge_id] = calls.get(judge.judge_id, 0) + len(judge.requests)
        Path(path).write_text(json.dumps(calls))
"""

SUITE = """
from evidex.testing import assert_grounded, assert_ranked, assert_sufficient, assert_tier

QUERY = "How much vitamin D do adults need?"
PASSAGES = [
    {"passage_id": "p1", "text": "Most adults need 600 IU (15 micrograms) of vitamin D a day."},
    {"passage_id": "p2", "text": "Vitamin D helps the body absorb calcium."},
    {"passage_id": "p3", "text": "The D-Day landings took place on 6 June 1944."},
    {"passage_id": "p4", "text": "The skin makes vitamin D in sunlight."},
]
"""

PASSING = (
    SUITE
    + """

def test_the_dose_passage_answers():
    assert_tier(QUERY, PASSAGES[0], at_least="directly-supporting")


def test_calcium_is_context_or_better():
    assert_tier(QUERY, PASSAGES[1], at_least="contextually-relevant")


def test_the_answer_leads_the_ranking():
    assert_ranked(QUERY, PASSAGES, ["p1", "p2"], top=2)


def test_the_answer_is_grounded():
    assert_grounded("Most adults need 600 IU of vitamin D a day.", PASSAGES)


def test_the_passages_suffice():
    assert_sufficient(QUERY, PASSAGES)
"""
)

FAILING = (
    SUITE
    + """

def test_tier():
    assert_tier(QUERY, PASSAGES[2], at_least="contextually-relevant")


def test_ranked():
    assert_ranked(QUERY, PASSAGES, "p4", top=2)


def test_grounded():
    answer = "Most adults need 600 IU of vitamin D a day. It also cures colds. Adults need 400 IU."
    assert_grounded(answer, PASSAGES, max_unsupported=1)


def test_sufficient():
    assert_sufficient(QUERY, PASSAGES[2:])


def test_confident_enough():
    assert_sufficient(QUERY, PASSAGES, min_confidence=0.8)
"""
)


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester folder with the scripted judges' conftest; the judge registry the in-process
    runs register into is a copy, put back after the test."""
    monkeypatch.setattr(judges, "JUDGES", dict(judges.JUDGES))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # tests.scripted, in subprocess runs too
    pytester.makeconftest(CONFTEST)
    return pytester


def test_installing_evidex_registers_the_plugin() -> None:
    found = {e.name: e.value for e in entry_points(group="pytest11")}
    assert found.get("evidex") == "evidex.testing.plugin"


def test_loading_the_plugin_imports_no_job_judge_or_store(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suite that never asserts with evidex pays only for the plugin module: pytest, and the
    standard library (the other installed plugins are left out, to measure this one)."""
    suite.makepyfile(
        test_plain="""
        import sys

        HEAVY = ("evidex.jobs", "evidex.judges", "evidex.store", "pydantic", "sqlalchemy",
                 "numpy", "onnxruntime", "aiohttp")

        def test_nothing_heavy_is_loaded(evidex):
            assert "evidex.testing.plugin" in sys.modules
            assert [m for m in HEAVY if m in sys.modules] == []
        """
    )
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PYTHONPATH")  # nor the tests package's conftest imports
    (suite.path / "conftest.py").unlink()
    result = suite.runpytest_subprocess("-p", "evidex.testing.plugin")
    result.assert_outcomes(passed=1)
    assert "evidex:" not in result.stdout.str()  # no check made, no summary line
    done = subprocess.run(
        [sys.executable, "-c", "import sys, evidex.testing; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(json.loads(done.stdout.replace("'", '"')))
    assert not loaded & {"pydantic", "sqlalchemy", "numpy", "evidex.jobs", "evidex.store"}


def test_a_passing_suite_passes_and_says_what_it_checked(
    suite: pytest.Pytester, tmp_path: Path
) -> None:
    suite.makepyfile(test_rag=PASSING)
    db = tmp_path / "checks.db"
    result = suite.runpytest("--evidex-judge", "scripted", "--evidex-db", str(db))
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "evidex: 5 checks (0 failed), * judge calls, 0 answered from the cache, 0 fell back;"
            f" judges: all jobs=scripted; store: sqlite:///{db}"
        ]
    )
    assert db.is_file()


def test_failures_show_the_claims_and_passages_that_failed_with_the_judges_reasons(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(test_rag=FAILING)
    result = suite.runpytest("--evidex-judge", "scripted")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            # tier: the grade, the passage, the judge's justification, where it sits
            "E* *EvidexAssertionError: passage 'p3' is not contextually-relevant or better: "
            "graded irrelevant, below contextually-relevant",
            'E* query: "How much vitamin D do adults need?"',
            'E* ✗ p3 irrelevant: "The D-Day landings took place on 6 June 1944."',
            "E* the judge: \"It is irrelevant: it says 'The D-Day landings took place '.\"",
            "E* tiers, most relevant first: directly-supporting > contextually-relevant > "
            "tangentially-related > [[]irrelevant[]]",
            "E* judged by scripted (prompt *, run *, 1 judge call)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            # rerank: where the named passage landed, the ranking with a rule under the top
            "E* *EvidexAssertionError: ranking for *: 1 of 1 not in the top 2 (p4 at 3)",
            "E* ranking, best first (rank, id, score, the judge's justification):",
            'E* 1  p1 0.99  "It says Most adults need 600 IU."',
            "E* 2  p2 0.98  *",
            "E* ---- top 2 ----",
            'E* ✗   3  p4 0.97  "It says The skin makes vitamin D."',
        ]
    )
    result.stdout.fnmatch_lines(
        [
            # audit: every claim, the failing ones with the judge's reasons and quotes
            "E* *EvidexAssertionError: answer not grounded: 2 unsupported claims (at most 1 "
            "allowed); 1 contradicted by a passage, of 3 claims",
            'E* ✓ fully_supported: "Most adults need 600 IU of vitamin D a day." [[]p1[]]',
            'E* ✗ unsupported: "It also cures colds."',
            'E* the judge: "No passage mentions colds."',
            'E* ✗ unsupported, contradicted: "Adults need 400 IU."',
            'E* contradicting quote: "Most adults need 600 IU (15 micrograms) of vitamin D a day."',
            'E* the judge: "The passage gives 600 IU, not 400."',
            "E* decision: *",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            # sufficiency: the verdict, what is missing
            "E* *EvidexAssertionError: the passages do not suffice to answer *: the judge "
            "finds them insufficient",
            "E* ✗ sufficient=False, confidence 0.90, decision *",
            "E* missing: the daily dose for adults",
            "E* supporting passages: none",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "E* *: sufficient, but with confidence 0.60 < 0.8",
            "E* key quotes:",
            'E* [[]p1[]] "Most adults need 600 IU (15 micrograms) of vitamin D a day."',
        ]
    )
    # pytest shows the test's own line, not the plugin's frames
    assert "_assertions.py" not in result.stdout.str()
    result.stdout.fnmatch_lines(["evidex: 5 checks (5 failed), *"])


def test_a_result_that_fell_back_fails_with_the_reason(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_rag=SUITE
        + """

def test_tier():
    assert_tier(QUERY, PASSAGES[3], at_least="irrelevant")  # any grade would do
"""
    )
    result = suite.runpytest("--evidex-judge", "broken")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E* *EvidexAssertionError: passage 'p4' is not irrelevant or better: the judge's "
            "reply never validated: *",
            "E* ✗ p4 fell back to contextually-relevant: *",
            "evidex: 1 check (1 failed), * judge calls, 0 answered from the cache, 1 fell back;*",
        ]
    )


def test_a_rerun_makes_no_judge_call_and_no_cache_judges_afresh(
    suite: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Separate processes, one store file: the second run is answered by the store's cache."""
    suite.makepyfile(test_rag=PASSING)
    db, calls = tmp_path / "checks.db", tmp_path / "calls.json"
    monkeypatch.setenv("EVIDEX_CALLS_FILE", str(calls))
    args = ("--evidex-judge", "scripted", "--evidex-db", str(db))

    first = suite.runpytest_subprocess(*args)
    first.assert_outcomes(passed=5)
    made = json.loads(calls.read_text())["scripted"]
    assert made >= 5  # one call per check at least (the audit's two passes are two)
    first.stdout.fnmatch_lines([f"evidex: 5 checks (0 failed), {made} judge calls, 0 answered*"])

    again = suite.runpytest_subprocess(*args)
    again.assert_outcomes(passed=5)
    assert json.loads(calls.read_text()) == {"scripted": 0}
    again.stdout.fnmatch_lines(["evidex: 5 checks (0 failed), 0 judge calls, 5 answered from*"])

    fresh = suite.runpytest_subprocess(*args, "--evidex-no-cache")
    fresh.assert_outcomes(passed=5)
    assert json.loads(calls.read_text()) == {"scripted": made}
    fresh.stdout.fnmatch_lines(["*; cache not read"])


def test_the_judge_of_one_job_and_ini_settings(suite: pytest.Pytester, tmp_path: Path) -> None:
    suite.makepyfile(test_rag=PASSING)
    db = tmp_path / "from-ini.db"
    suite.makeini(
        f"[pytest]\nevidex_judge =\n    scripted\n    tier=scripted-b\nevidex_db = {db}\n"
    )
    result = suite.runpytest("-k", "dose or calcium")
    result.assert_outcomes(passed=2, deselected=3)
    result.stdout.fnmatch_lines(
        [f"evidex: 2 checks *; judges: all jobs=scripted, tier=scripted-b; store: sqlite:///{db}"]
    )
    # the command line wins over the ini file
    result = suite.runpytest("-k", "dose", "--evidex-judge", "tier=scripted")
    result.stdout.fnmatch_lines(["*judges: tier=scripted;*"])
    result = suite.runpytest("--evidex-judge", "summarise=scripted")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--evidex-judge names unknown job(s) [[]'summarise'[]]; jobs: *"])


def test_the_fixture_gives_the_runs_jobs_and_assertions(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_rag=SUITE
        + """

def test_with_the_fixture(evidex):
    result = evidex.tier(QUERY, PASSAGES)
    assert [a.tier for a in result.classifications] == [
        "directly-supporting", "contextually-relevant", "irrelevant", "tangentially-related"
    ]
    assert evidex.judge("tier").judge_id == "scripted-b"
    assert evidex.judge("rerank").judge_id == "scripted"
    evidex.assert_ranked(QUERY, PASSAGES, "p1", top=1)
    verdict = evidex.assert_sufficient(QUERY, PASSAGES)
    assert verdict.supporting_passage_ids == ["p1"]
"""
    )
    result = suite.runpytest("--evidex-judge", "scripted", "--evidex-judge", "tier=scripted-b")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["evidex: 2 checks (0 failed), *"])  # the raw call is no check


def test_the_embedded_judge_grades_tiers_for_real(suite: pytest.Pytester, tmp_path: Path) -> None:
    suite.makepyfile(
        test_rag=SUITE
        + """

def test_the_dose_is_relevant():
    assert_tier(QUERY, PASSAGES[0], at_least="contextually-relevant")


def test_d_day_is_not():
    assert_tier(QUERY, PASSAGES[2], at_least="contextually-relevant")
"""
    )
    db = tmp_path / "minilm.db"
    result = suite.runpytest("--evidex-judge", "tier=local:minilm", "--evidex-db", str(db))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E* *: passage 'p3' is not contextually-relevant or better: graded *",
            'E* the judge: "heuristic (MiniLM cosine): *',
            "E* judged by local:minilm *",
        ]
    )
