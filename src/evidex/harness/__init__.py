"""The harness: runs any job's spec with any judge, with the contract every job shares.

``job`` (a job as a spec: plan, stages, merge, review requests; ``Harness.run``), ``runner``
(one validated exchange: cache, the judge's gate, timeout, re-asks, the temperature-0 retry,
the explicit fallback), ``budget`` (token budgets fitted once), ``routing`` (what review
routing shares), ``events`` and ``metrics`` (the audit-log records and their subscribers),
``ports`` (what the harness needs of a store), ``settings`` and ``outcome`` (its data types).

It may import ``evidex.types``, ``errors``, ``judging``, ``limits``, ``tasks`` and ``_text``;
never a judge backend, the store's database code, the CLI or the service.
"""
