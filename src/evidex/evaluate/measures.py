"""Measures as values: ``nDCG@10``, ``P(rel=2)@10``, ``kappa_linear`` parsed from strings.

A :class:`Measure` only *names* what to compute (the name, its parameters, its cutoff); the
arithmetic is in :mod:`evidex.evaluate.metrics` and the per-job evaluators decide which
measures they can report. Keeping the two apart lets a gate file, a report and a test speak of
the same figure by the same canonical string, and makes an unknown or misspelled measure an
error at parse time rather than a silent zero.

Syntax: ``NAME[(param=value, ...)][@cutoff]``. Known names and their parameters:

============================  =================  =====================================
name                          parameters         meaning
============================  =================  =====================================
``kappa``                     -                  Cohen's kappa over all labels
``kappa_linear``              -                  linear-weighted kappa (ordered labels)
``kappa_quadratic``           -                  quadratic-weighted kappa
``kappa_binary``              ``boundary``       kappa after cutting the order at a label
``accuracy``                  -                  share of exact matches
``macro_f1``                  -                  unweighted mean of per-label F1
``f1``                        ``label``          F1 of one label against the rest
``nDCG``                      ``gain``           linear (trec_eval default) or exponential
``P``                         ``rel``            precision at the cutoff, relevant = rel+
``RR``                        ``rel``            reciprocal rank of the first relevant
``citation_precision``        ``avg``            micro (default) or macro
``citation_recall``           ``avg``            micro (default) or macro
``claim_f1``                  -                  claim-level F1 (claim and label match)
``verbatim_share``            -                  share of quotes found word for word
``abstention_rate``           -                  share of queries the decision abstains on
``escalation_rate``           -                  share of queries handed to a person
``false_abstention_rate``     -                  share of answerable queries abstained on
``consistency_kappa``         -                  kappa between re-runs (shuffled, re-split)
============================  =================  =====================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from evidex.errors import ConfigError

__all__ = ["MEASURES", "Measure", "parse_measure"]

MEASURES: dict[str, dict[str, tuple[str, ...] | None]] = {
    # name → {param: allowed values (None = free text/number)}
    "kappa": {},
    "kappa_linear": {},
    "kappa_quadratic": {},
    "kappa_binary": {"boundary": None},
    "accuracy": {},
    "macro_f1": {},
    "f1": {"label": None},
    "nDCG": {"gain": ("linear", "exponential")},
    "P": {"rel": None},
    "RR": {"rel": None},
    "citation_precision": {"avg": ("micro", "macro")},
    "citation_recall": {"avg": ("micro", "macro")},
    "claim_f1": {},
    "verbatim_share": {},
    "abstention_rate": {},
    "escalation_rate": {},
    "false_abstention_rate": {},
    "consistency_kappa": {},
}
_CUTOFF = frozenset({"nDCG", "P"})
_DEFAULTS: dict[str, dict[str, str]] = {
    "nDCG": {"gain": "linear"},
    "P": {"rel": "1"},
    "RR": {"rel": "1"},
    "citation_precision": {"avg": "micro"},
    "citation_recall": {"avg": "micro"},
}
_LOWER_IS_BETTER = frozenset({"false_abstention_rate"})
_NO_BETTER_WAY = frozenset({"abstention_rate", "escalation_rate"})
_SYNTAX = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^)]*)\))?\s*(?:@\s*(\d+))?\s*$")


@dataclass(frozen=True)
class Measure:
    """A named figure. ``str(measure)`` is canonical: defaults are left out, so
    ``nDCG(gain=linear)@10`` and ``nDCG@10`` are the same measure and the same report key."""

    name: str
    params: tuple[tuple[str, str], ...] = field(default=())
    cutoff: int | None = None

    @property
    def better(self) -> Literal["higher", "lower"] | None:
        """Which way the figure improves: ``higher`` for agreement, ranking, citation and
        claim figures, ``lower`` for the share of answerable questions abstained on, and
        ``None`` for the shares whose right value depends on the golden set (abstention,
        escalation): a comparison shows their change but never calls it a regression."""
        if self.name in _LOWER_IS_BETTER:
            return "lower"
        return None if self.name in _NO_BETTER_WAY else "higher"

    def param(self, key: str) -> str:
        """A parameter's value, or its default."""
        return dict(self.params).get(key) or _DEFAULTS.get(self.name, {}).get(key, "")

    def __str__(self) -> str:
        defaults = _DEFAULTS.get(self.name, {})
        shown = [(k, v) for k, v in self.params if defaults.get(k) != v]
        text = self.name
        if shown:
            text += "(" + ",".join(f"{k}={v}" for k, v in shown) + ")"
        if self.cutoff is not None:
            text += f"@{self.cutoff}"
        return text


def parse_measure(text: str) -> Measure:
    """Parse ``nDCG@10``, ``P(rel=2)@10``, ``kappa_binary(boundary=contextually-relevant)``.

    Raises :class:`ConfigError` naming the known measures when the name, a parameter or the
    cutoff does not fit.
    """
    match = _SYNTAX.match(text)
    if not match:
        raise ConfigError(f"cannot parse measure {text!r}; expected NAME[(param=value)][@k]")
    name, raw_params, raw_cutoff = match.groups()
    if name not in MEASURES:
        raise ConfigError(f"unknown measure {name!r}; known measures: {', '.join(MEASURES)}")
    params = _parse_params(text, name, raw_params or "", MEASURES[name])
    cutoff = int(raw_cutoff) if raw_cutoff else None
    if cutoff is not None and name not in _CUTOFF:
        raise ConfigError(f"measure {name!r} takes no @cutoff (in {text!r})")
    if name in _CUTOFF and (cutoff is None or cutoff < 1):
        raise ConfigError(f"measure {name!r} needs a positive @cutoff, e.g. {name}@10")
    if name == "kappa_binary" and "boundary" not in dict(params):
        raise ConfigError("kappa_binary needs a boundary: kappa_binary(boundary=LABEL)")
    if name == "f1" and "label" not in dict(params):
        raise ConfigError("f1 needs a label: f1(label=LABEL)")
    return Measure(name=name, params=params, cutoff=cutoff)


def _parse_params(
    text: str, name: str, raw: str, allowed: Mapping[str, tuple[str, ...] | None]
) -> tuple[tuple[str, str], ...]:
    params: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ConfigError(f"parameter {part!r} of {text!r} must be key=value")
        if key not in allowed:
            known = ", ".join(allowed) or "none"
            raise ConfigError(f"measure {name!r} has no parameter {key!r} (parameters: {known})")
        choices = allowed[key]
        if choices is not None and value not in choices:
            raise ConfigError(f"{name}({key}=...) must be one of {', '.join(choices)}")
        if key == "rel" and not value.lstrip("-").isdigit():
            raise ConfigError(f"{name}(rel=...) must be an integer grade, got {value!r}")
        params[key] = value
    return tuple(sorted(params.items()))
