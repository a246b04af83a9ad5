"""evidex in your test suite: assert that an answer is grounded, a passage relevant, a ranking
right or the evidence sufficient, with the judge's reasons in the failure message.

::

    from evidex.testing import assert_grounded, assert_ranked, assert_sufficient, assert_tier

    def test_the_answer_is_backed_by_its_passages():
        assert_grounded(answer, passages, max_unsupported=0, no_contradiction=True)

Each assertion runs one job (audit, tier, rerank, sufficiency) and raises
:class:`EvidexAssertionError`, an ``AssertionError``, listing the claims or passages that failed
with the judge's status, justification and quotes. A result that fell back fails: a fallback is
no judgment. Each returns the job's result for further checks.

The pytest plugin (:mod:`evidex.testing.plugin`, the ``pytest11`` entry point ``evidex``: it is
loaded wherever evidex is installed) sets the judges (``--evidex-judge SPEC`` or
``JOB=SPEC``), the store (``--evidex-db``) whose content-addressed cache makes a rerun cost no
judge call (``--evidex-no-cache`` to judge afresh), gives the ``evidex`` fixture, and prints
one summary line. Neither this package nor the plugin imports a job, judge or store before the
first assertion runs: a suite that does not use them pays nothing at collection. Outside
pytest the assertions use each job's default judge and store.
"""

from evidex.testing._assertions import (
    EvidexAssertionError,
    assert_grounded,
    assert_ranked,
    assert_sufficient,
    assert_tier,
)
from evidex.testing._fixture import Evidex

__all__ = [
    "Evidex",
    "EvidexAssertionError",
    "assert_grounded",
    "assert_ranked",
    "assert_sufficient",
    "assert_tier",
]
