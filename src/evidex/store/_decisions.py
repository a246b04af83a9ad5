"""Which decisions a review item accepts, checked when the decision is written.

The allowed values depend on the job and on the item, whose payload names its vocabulary:

- ``tier``: a tier name of the item's scheme (``payload["tiers"]``, else the default tiers),
  or a JSON object ``{"passage_id": "tier", ...}`` over the item's passages, or
  ``accept``/``reject``;
- ``classify``: a label of the taxonomy (``payload["labels"]``, else the labels the item
  mentions), or a JSON array of them, or ``accept``/``reject``/``unclassifiable``;
- ``audit``: a claim status or an answer decision (``publish``/``review``/``block``), or a
  JSON object ``{"claim_id": "status", ...}`` over the item's claims, or ``accept``/``reject``;
- ``rerank``: ``accept``/``reject`` or a ranking: a JSON array (or a comma list) of the item's
  passage ids, best first, each at most once;
- any other job: ``accept``/``reject``.

:mod:`evidex.evaluate.review_export` reads these forms back (tier names, the tier object,
``accept``/``reject``), so what is written here is what the export understands.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evidex.errors import InputError
from evidex.types import DEFAULT_TIERS

__all__ = ["AUDIT_STATUSES", "MAX_DECISION_CHARS", "check_decision"]

AUDIT_STATUSES = (
    "fully_supported",
    "partially_supported",
    "inferred",
    "unsupported",
    "contradicted",
)
AUDIT_DECISIONS = ("publish", "review", "block")
VERDICTS = ("accept", "reject")
MAX_DECISION_CHARS = 10_000


def check_decision(job: str, item: Mapping[str, Any], decision: str) -> str:
    """``decision`` as it will be stored (trimmed; keywords lower-cased), or an
    :class:`~evidex.errors.InputError` naming the values this item allows."""
    value = decision.strip()
    if not value:
        raise InputError(f"a decision is required; {_describe(job, item)}")
    if len(value) > MAX_DECISION_CHARS:
        raise InputError(f"a decision has at most {MAX_DECISION_CHARS} characters")
    check = _CHECKS.get(job, _verdict_only)
    return check(item, value)


def _tier(item: Mapping[str, Any], value: str) -> str:
    names = _tier_names(item)
    if value.lower() in VERDICTS:
        return value.lower()
    if value in names:
        return value
    if value.startswith("{"):
        mapping = _json(value, dict, item, "tier")
        return _per_item(mapping, _passage_ids(item), names, ("passage", "tiers", "tiers"))
    raise _not_allowed(value, "tier", item)


def _per_item(
    mapping: dict[Any, Any],
    ids: Sequence[str],
    allowed: Sequence[str],
    words: tuple[str, str, str],
) -> str:
    """A decision per passage or claim: every key one of ``ids``, every value ``allowed``.
    ``words``: what is keyed, what the values are, and how an unknown value is called."""
    what, values, unknown = words
    known = set(ids)
    bad_ids = sorted(str(k) for k in mapping if str(k) not in known)
    bad = sorted({str(v) for v in mapping.values() if v not in allowed})
    if bad_ids or bad or not mapping:
        raise InputError(
            f"a per-{what} decision maps this item's {what} ids ({_short(sorted(known))}) to "
            f"{values} ({', '.join(allowed)}); "
            + (f"unknown {what} ids: {_short(bad_ids)}; " if bad_ids else "")
            + (f"unknown {unknown}: {_short(bad)}" if bad else "")
        )
    return json.dumps(mapping, ensure_ascii=False, sort_keys=True)


def _classify(item: Mapping[str, Any], value: str) -> str:
    labels = _labels(item)
    if value.lower() in (*VERDICTS, "unclassifiable"):
        return value.lower()
    if value in labels:
        return value
    if value.startswith("["):
        chosen = _json(value, list, item, "classify")
        bad = sorted({str(v) for v in chosen if v not in labels})
        if bad or not chosen or len(set(chosen)) != len(chosen):
            raise InputError(
                f"a list of labels names each label of the taxonomy at most once "
                f"({', '.join(labels) or 'none known'}); not allowed: {_short(bad)}"
            )
        return json.dumps(chosen, ensure_ascii=False)
    raise _not_allowed(value, "classify", item)


def _audit(item: Mapping[str, Any], value: str) -> str:
    if value.lower() in (*VERDICTS, *AUDIT_STATUSES, *AUDIT_DECISIONS):
        return value.lower()
    if value.startswith("{"):
        mapping = _json(value, dict, item, "audit")
        return _per_item(
            mapping, _claim_ids(item), AUDIT_STATUSES, ("claim", "claim statuses", "statuses")
        )
    raise _not_allowed(value, "audit", item)


def _rerank(item: Mapping[str, Any], value: str) -> str:
    if value.lower() in VERDICTS:
        return value.lower()
    ids = _passage_ids(item)
    if value.startswith("["):
        ranking = [str(v) for v in _json(value, list, item, "rerank")]
    else:
        ranking = [part.strip() for part in value.split(",") if part.strip()]
    unknown = sorted(set(ranking) - set(ids))
    if not ranking or unknown or len(set(ranking)) != len(ranking):
        if len(ranking) <= 1 and not value.startswith("[") and unknown:
            raise _not_allowed(value, "rerank", item)
        raise InputError(
            f"a ranking lists this item's passage ids ({_short(ids)}), best first, each at most "
            "once" + (f"; unknown: {_short(unknown)}" if unknown else "")
        )
    return json.dumps(ranking, ensure_ascii=False)


def _verdict_only(item: Mapping[str, Any], value: str) -> str:
    if value.lower() in VERDICTS:
        return value.lower()
    raise _not_allowed(value, str(item.get("job") or "this"), item)


_CHECKS: dict[str, Callable[[Mapping[str, Any], str], str]] = {
    "tier": _tier,
    "classify": _classify,
    "audit": _audit,
    "rerank": _rerank,
}


# ---------------------------------------------------------------------------- vocabulary


def _payload(item: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = item.get("payload")
    return payload if isinstance(payload, Mapping) else {}


def _tier_names(item: Mapping[str, Any]) -> list[str]:
    tiers = _payload(item).get("tiers")
    if isinstance(tiers, list) and tiers and all(isinstance(t, str) for t in tiers):
        return list(tiers)
    return list(DEFAULT_TIERS.names)


def _labels(item: Mapping[str, Any]) -> list[str]:
    payload = _payload(item)
    labels = payload.get("labels")
    if isinstance(labels, list) and labels and all(isinstance(x, str) for x in labels):
        return list(labels)
    found: list[str] = []  # an item written before payloads named the taxonomy
    if isinstance(payload.get("label"), str):
        found.append(payload["label"])
    result = payload.get("result")
    if isinstance(result, Mapping):
        for assignment in result.get("classifications") or []:
            if isinstance(assignment, Mapping) and isinstance(assignment.get("label"), str):
                found.append(assignment["label"])
    return list(dict.fromkeys(found))


def _passage_ids(item: Mapping[str, Any]) -> list[str]:
    return [str(p) for p in item.get("passage_ids") or []]


def _claim_ids(item: Mapping[str, Any]) -> list[str]:
    claims = _payload(item).get("claims")
    if not isinstance(claims, list):
        return []
    return [str(c["claim_id"]) for c in claims if isinstance(c, Mapping) and c.get("claim_id")]


def _describe(job: str, item: Mapping[str, Any]) -> str:
    if job == "tier":
        return (
            f"allowed: {', '.join((*_tier_names(item), *VERDICTS))}, or a JSON object "
            "mapping passage ids to tiers"
        )
    if job == "classify":
        labels = _labels(item)
        return (
            f"allowed: {', '.join((*labels, *VERDICTS, 'unclassifiable'))}, or a JSON array "
            "of labels"
        )
    if job == "audit":
        return (
            f"allowed: {', '.join((*AUDIT_STATUSES, *AUDIT_DECISIONS, *VERDICTS))}, or a JSON "
            "object mapping claim ids to statuses"
        )
    if job == "rerank":
        return (
            f"allowed: {', '.join(VERDICTS)}, or a ranking of the item's passage ids "
            f"({_short(_passage_ids(item))}) as a JSON array or a comma list"
        )
    return f"allowed: {', '.join(VERDICTS)}"


def _not_allowed(value: str, job: str, item: Mapping[str, Any]) -> InputError:
    shown = value if len(value) <= 60 else value[:57] + "..."
    return InputError(
        f"decision {shown!r} is not allowed for this {job} item; {_describe(job, item)}"
    )


def _json(value: str, kind: type, item: Mapping[str, Any], job: str) -> Any:
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise InputError(f"the decision is not valid JSON ({exc}); {_describe(job, item)}") from exc
    if not isinstance(parsed, kind):
        raise _not_allowed(value, job, item)
    return parsed


def _short(values: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(values[:limit])
    return shown + (f" (+{len(values) - limit} more)" if len(values) > limit else "")
