"""The ``evidex`` fixture's value: the run's judges and store, as calls and assertions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from evidex.testing import _assertions
from evidex.testing._session import Session, current

if TYPE_CHECKING:
    from evidex.jobs.audit import AuditResult
    from evidex.jobs.classify import ClassifyResult
    from evidex.jobs.rerank import RerankResult
    from evidex.jobs.sufficiency import SufficiencyResult
    from evidex.jobs.tier import TierResult
    from evidex.types import PassageLike

__all__ = ["Evidex"]


class Evidex:
    """The jobs and assertions of a test run, with the judges and store its options set
    (``--evidex-judge``, ``--evidex-db``): ``evidex.tier(...)`` returns the result for a check
    of your own, ``evidex.assert_tier(...)`` asserts as :func:`evidex.testing.assert_tier`
    does. ``judge(job)`` and ``store`` are the run's."""

    def __init__(self, session: Session | None = None) -> None:
        self.session = session or current()

    @property
    def store(self) -> Any:
        return self.session.store()

    def judge(self, job: str) -> Any:
        return self.session.judge(job)

    # ------------------------------------------------------------------ the jobs' results

    def tier(self, query: str, passages: Iterable[PassageLike], **options: Any) -> TierResult:
        from evidex.jobs.tier import tier

        return tier(query, passages, **self.session.keywords("tier", options))

    def rerank(self, query: str, passages: Iterable[PassageLike], **options: Any) -> RerankResult:
        from evidex.jobs.rerank import rerank

        return rerank(query, passages, **self.session.keywords("rerank", options))

    def audit(self, answer: str, passages: Iterable[PassageLike], **options: Any) -> AuditResult:
        from evidex.jobs.audit import audit

        return audit(answer, passages, **self.session.keywords("audit", options))

    def sufficiency(
        self, query: str, passages: Iterable[PassageLike], **options: Any
    ) -> SufficiencyResult:
        from evidex.jobs.sufficiency import sufficiency

        return sufficiency(query, passages, **self.session.keywords("sufficiency", options))

    def classify(
        self, text: str, passages: Iterable[PassageLike], taxonomy: Any, **options: Any
    ) -> ClassifyResult:
        from evidex.jobs.classify import classify

        return classify(text, passages, taxonomy, **self.session.keywords("classify", options))

    # ------------------------------------------------------------------ the assertions

    def assert_grounded(
        self, answer: str, passages: Iterable[PassageLike], **options: Any
    ) -> AuditResult:
        __tracebackhide__ = True
        return _assertions.assert_grounded(answer, passages, session=self.session, **options)

    def assert_tier(self, query: str, passage: PassageLike, **options: Any) -> TierResult:
        __tracebackhide__ = True
        return _assertions.assert_tier(query, passage, session=self.session, **options)

    def assert_ranked(
        self,
        query: str,
        passages: Iterable[PassageLike],
        expected: str | Sequence[str],
        **options: Any,
    ) -> RerankResult:
        __tracebackhide__ = True
        return _assertions.assert_ranked(query, passages, expected, session=self.session, **options)

    def assert_sufficient(
        self, query: str, passages: Iterable[PassageLike], **options: Any
    ) -> SufficiencyResult:
        __tracebackhide__ = True
        return _assertions.assert_sufficient(query, passages, session=self.session, **options)
