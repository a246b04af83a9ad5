"""The service fuzzed from its own OpenAPI document: schemathesis sends valid and invalid
requests to every operation of a real uvicorn server on loopback (an admin key, the scripted
judge), and no response may be a server error or break the schema the document gives it."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from evidex.judging import JudgeReply, JudgeRequest, TierPayload
from evidex.store import SqlStore
from tests.live_service import serve_app
from tests.scripted import ScriptedJudge, tier_reply

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
)

from evidex.service import create_app  # noqa: E402

EXAMPLES_PER_OPERATION = 20
"""Per operation and generation mode: some 800 requests in all, about 30 s on two cores."""

CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


class EndlessJudge(ScriptedJudge):
    """Answers every request: a valid tier reply, else a reply that fails validation (the
    other jobs then take their explicit fallbacks, which are 200s too)."""

    async def complete(self, request: JudgeRequest) -> JudgeReply:
        self.replies = [tier_reply if isinstance(request.payload, TierPayload) else "{}"]
        return await super().complete(request)


class Findings:
    """What the fuzzing saw: requests per operation, statuses, and every failed check."""

    def __init__(self) -> None:
        self.examples: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.failures: list[str] = []

    def fuzz(self, operation: Any, mode: GenerationMode, url: str, headers: dict[str, str]) -> None:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case: Any) -> None:
            self.examples[operation.label] += 1
            try:
                response = case.call(base_url=url, headers=headers)
                self.statuses[response.status_code] += 1
                case.validate_response(response, checks=CHECKS, headers=headers)
            except (Exception, FailureGroup) as exc:  # a finding: collected, reported at once
                self.failures.append(f"{operation.label} ({mode.value}): {str(exc)[:600]}")

        # an operation without parameters has nothing to make invalid: no negative cases
        with contextlib.suppress(Unsatisfiable):
            exercise()


@pytest.fixture
def server(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    from evidex.jobs import job_names

    for job in job_names():  # every registered job, so no request loads an embedded model
        monkeypatch.setenv(f"EVIDEX_JUDGE_{job.upper()}", "scripted")
    _, secret = store.create_key("admin")
    app = create_app(store, judges={"scripted": EndlessJudge()}, auth="keys")
    with serve_app(app) as url:
        yield url, secret


@pytest.mark.slow
@pytest.mark.network
def test_fuzzing_finds_no_server_error_and_no_response_off_its_schema(
    server: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, secret = server
    headers = {"Authorization": f"Bearer {secret}"}
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", headers=headers)
    found = Findings()
    for result in schema.get_all_operations():
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            found.fuzz(result.ok(), mode, url, headers)
    examples, statuses, failures = found.examples, found.statuses, found.failures

    with capsys.disabled():
        print(
            f"\nfuzz: {sum(examples.values())} requests over {len(examples)} operations; "
            f"statuses {dict(sorted(statuses.items()))}; {len(failures)} failures"
        )
    assert len(examples) >= 15
    assert not [s for s in statuses if s >= 500]
    assert failures == [], "\n\n".join(failures[:10])
