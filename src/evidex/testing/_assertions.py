"""The assertions: one job call each, with the run's judge and store, and a failure message
that shows what failed and why (:mod:`evidex.testing._messages`).

**A fallback is never a pass.** When the judge's replies never validated and a job fell back
(tier's conservative tier, rerank's retrieval order, audit's review, sufficiency's
escalation), the assertion fails and says so with the harness's reason: a fallback is no
judgment, and a test that passed on one would pass on a broken judge. The jobs are imported on
the first call, not when this module is: a suite that imports the assertions collects fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from evidex.testing._messages import claim_lines, footer, quoted, ranking_lines
from evidex.testing._session import Session, current

if TYPE_CHECKING:
    from evidex.jobs.audit import AuditResult
    from evidex.jobs.rerank import RerankResult
    from evidex.jobs.sufficiency import SufficiencyResult
    from evidex.jobs.tier import TierResult
    from evidex.types import PassageLike

__all__ = [
    "EvidexAssertionError",
    "assert_grounded",
    "assert_ranked",
    "assert_sufficient",
    "assert_tier",
]


class EvidexAssertionError(AssertionError):
    """An evidex assertion failed. ``result`` is the job's whole result (every claim, tier or
    ranking with the judge's reasons), for a test that wants to look further."""

    __module__ = "evidex.testing"

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result


def assert_grounded(
    answer: str,
    passages: Iterable[PassageLike],
    *,
    max_unsupported: int = 0,
    no_contradiction: bool = True,
    session: Session | None = None,
    **options: Any,
) -> AuditResult:
    """Assert that ``answer`` is backed by ``passages`` (the audit job): at most
    ``max_unsupported`` claims graded ``unsupported``, and with ``no_contradiction`` none that a
    passage contradicts. Claims graded ``partially_supported`` or ``inferred`` pass (they are
    shown); a claim that fell back, or a part of the answer that could not be audited, fails.
    ``options``: the audit job's (``question=``, ``claims=``, ``risk=``, ``mode=`` ...) and
    ``judge=``/``store=`` to override the run's. Returns the audit."""
    __tracebackhide__ = True
    from evidex.jobs.audit import audit

    run = session or current()
    result = audit(answer, passages, **run.keywords("audit", options))
    unsupported = [i for i, c in enumerate(result.claims) if c.classification == "unsupported"]
    contradicted = [i for i, c in enumerate(result.claims) if c.contradicted]
    fell_back = [i for i, c in enumerate(result.claims) if c.source == "fallback"]
    problems = []
    if len(unsupported) > max_unsupported:
        problems.append(
            f"{len(unsupported)} unsupported claim{'s' * (len(unsupported) != 1)} "
            f"(at most {max_unsupported} allowed)"
        )
    if no_contradiction and contradicted:
        problems.append(f"{len(contradicted)} contradicted by a passage")
    if fell_back or result.unaudited or result.source == "fallback":
        not_judged = len(fell_back) + len(result.unaudited)
        problems.append(f"{not_judged} not judged (fallback: {result.reason or 'see below'})")
    failing = set(fell_back)
    if len(unsupported) > max_unsupported:
        failing |= set(unsupported)
    if no_contradiction:
        failing |= set(contradicted)
    _check(
        run,
        result,
        problems,
        f"answer not grounded: {'; '.join(problems)}, of {len(result.claims)} claims",
        [
            *claim_lines(result, sorted(failing)),
            f"  decision: {result.decision.decision}"
            + "".join(f"; {r.message}" for r in result.decision.reasons),
        ],
        fell_back=bool(fell_back or result.unaudited or result.source == "fallback"),
    )
    return result


def assert_tier(
    query: str,
    passage: PassageLike,
    *,
    at_least: str | None = None,
    session: Session | None = None,
    **options: Any,
) -> TierResult:
    """Assert that ``passage`` is graded ``at_least`` this tier for ``query`` (the tier job;
    default: the scheme's top tier). Tiers are ordered, most relevant first, so a passage in
    a better tier passes. ``options``: the tier job's (``tiers=`` your own scheme, ``risk=``
    ...) and ``judge=``/``store=``. Returns the tier result."""
    __tracebackhide__ = True
    from evidex.errors import InputError
    from evidex.jobs.tier import tier

    run = session or current()
    result = tier(query, [passage], **run.keywords("tier", options))
    names = result.scheme.names
    wanted = at_least or names[0]
    if wanted not in names:
        raise InputError(f"at_least={wanted!r} is not a tier of the scheme: {names}")
    graded = result.classifications[0]
    fell_back = graded.source == "fallback"
    problems = []
    if fell_back:
        problems.append(f"the judge's reply never validated: {graded.reason or 'no reason given'}")
    elif names.index(graded.tier) > names.index(wanted):
        problems.append(f"graded {graded.tier}, below {wanted}")
    text = result.passages[0].text if result.passages else ""
    ladder = " > ".join(f"[{n}]" if n == graded.tier else n for n in names)
    lines = [
        f"  query: {quoted(query)}",
        f"  ✗ {graded.passage_id} {'fell back to ' * fell_back}{graded.tier}: {quoted(text)}",
        f"      the judge: {quoted(graded.justification, 300)}",
    ]
    if graded.key_evidence_snippet:
        lines.append(f"      snippet: {quoted(graded.key_evidence_snippet)}")
    lines.append(f"  tiers, most relevant first: {ladder}")
    _check(
        run,
        result,
        problems,
        f"passage {graded.passage_id!r} is not {wanted} or better: {'; '.join(problems)}",
        lines,
        fell_back=fell_back,
    )
    return result


def assert_ranked(
    query: str,
    passages: Iterable[PassageLike],
    expected: str | Sequence[str],
    *,
    top: int | None = None,
    session: Session | None = None,
    **options: Any,
) -> RerankResult:
    """Assert that the passages ``expected`` names (ids) are all within the ``top`` places
    when ``passages`` are reranked for ``query`` (the rerank job; default ``top``: as many
    places as passages named, so they must lead the ranking in some order). ``options``: the
    rerank job's (``strategy=``, ``top_n=`` ...) and ``judge=``/``store=``. Returns the
    ranking."""
    __tracebackhide__ = True
    from evidex.errors import InputError
    from evidex.jobs.rerank import rerank
    from evidex.preflight import coerce_passages

    named = [expected] if isinstance(expected, str) else list(expected)
    given = coerce_passages(passages)
    unknown = [pid for pid in named if pid not in {p.passage_id for p in given}]
    if not named or unknown:
        raise InputError(
            f"name the passages to find in the top places by their ids: {unknown or named} "
            f"are not among {[p.passage_id for p in given]}"
        )
    k = len(named) if top is None else top
    if k < 1:
        raise InputError(f"top must be at least 1, got {k}")
    run = session or current()
    result = rerank(query, given, **run.keywords("rerank", options))
    ranks = {p.passage_id: p.rank for p in result.ranked_passages}
    missing = [pid for pid in named if ranks.get(pid, k + 1) > k]
    fell_back = result.source == "fallback"
    problems = []
    if fell_back:
        problems.append(
            f"the ranking fell back to retrieval order: {result.reason or 'no reason given'}"
        )
    if missing:
        where = ", ".join(f"{pid} at {ranks[pid]}" for pid in missing if pid in ranks)
        problems.append(f"{len(missing)} of {len(named)} not in the top {k} ({where})")
    _check(
        run,
        result,
        problems,
        f"ranking for {quoted(query, 80)}: {'; '.join(problems)}",
        ranking_lines(result, k, missing, named),
        fell_back=fell_back,
    )
    return result


def assert_sufficient(
    query: str,
    passages: Iterable[PassageLike],
    *,
    min_confidence: float | None = None,
    session: Session | None = None,
    **options: Any,
) -> SufficiencyResult:
    """Assert that ``passages`` alone suffice to answer ``query`` (the sufficiency job), with
    a confidence of at least ``min_confidence`` when given. ``options``: the job's (``risk=``,
    ``policy=`` ...) and ``judge=``/``store=``. Returns the verdict."""
    __tracebackhide__ = True
    from evidex.jobs.sufficiency import sufficiency

    run = session or current()
    result = sufficiency(query, passages, **run.keywords("sufficiency", options))
    fell_back = result.source == "fallback"
    problems = []
    if fell_back:
        problems.append(f"the judge's reply never validated: {result.reason or 'no reason given'}")
    elif not result.sufficient:
        problems.append("the judge finds them insufficient")
    elif min_confidence is not None and result.confidence < min_confidence:
        problems.append(
            f"sufficient, but with confidence {result.confidence:.2f} < {min_confidence}"
        )
    quotes = [f"        [{q.passage_id}] {quoted(q.quoted_text)}" for q in result.key_quotes]
    lines = [
        f"  ✗ sufficient={result.sufficient}, confidence {result.confidence:.2f}, decision "
        f"{result.decision.decision}" + "".join(f"; {r.message}" for r in result.decision.reasons),
        f"      missing: {'; '.join(result.missing) or 'nothing named'}",
        f"      supporting passages: {', '.join(result.supporting_passage_ids) or 'none'}",
        *(["      key quotes:", *quotes] if quotes else []),
    ]
    _check(
        run,
        result,
        problems,
        f"the passages do not suffice to answer {quoted(query, 80)}: {'; '.join(problems)}",
        lines,
        fell_back=fell_back,
    )
    return result


def _check(
    run: Session,
    result: Any,
    problems: Sequence[str],
    headline: str,
    lines: Sequence[str],
    *,
    fell_back: bool,
) -> None:
    """Count the check, and raise :class:`EvidexAssertionError` when there are problems."""
    __tracebackhide__ = True
    run.count(result, failed=bool(problems), fell_back=fell_back)
    if problems:
        raise EvidexAssertionError("\n".join([headline, *lines, f"  {footer(result)}"]), result)
