"""The harness: runs any job's spec with any judge, with the contract every job shares.

``job`` (a job as a spec: plan, stages, merge, review requests; ``Harness.run``), ``runner``
(one validated exchange: cache, the judge's gate, timeout, re-asks, the temperature-0 retry,
the explicit fallback), ``budget`` (token budgets fitted once), ``routing`` (what review
routing shares), ``events`` and ``metrics`` (the audit-log records and their subscribers),
``ports`` (what the harness needs of a store), ``settings`` and ``outcome`` (its data types),
``tracing`` (OpenTelemetry spans of job, step and attempt, when ``opentelemetry-api`` is there).

It may import ``evidex.types``, ``errors``, ``judging``, ``limits``, ``pricing``, ``tasks``
and ``_text`` (and ``opentelemetry``, lazily, in ``tracing`` only); never a judge backend, the
store's database code, the CLI or the service.
"""
