"""How a job is evaluated, declared in its definition beside its options and models.

``evidex eval JOB``, ``evidex calibrate JOB``, ``evidex review export`` and a data set folder
given as a golden set all find what they need here, through the registry, so none of them
names a job. What the evaluation is made of is named by import path (``"module:attribute"``)
and imported on first use: the evaluation package runs the jobs, so a job module that imported
it would import itself in a circle, and listing the jobs stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from evidex.errors import ConfigError

__all__ = ["Evaluation", "import_path"]


def import_path(target: str) -> Any:
    """The object that ``"package.module:attribute"`` names; a wrong path is a
    :class:`ConfigError` naming it (a job's definition is configuration, not user input)."""
    module_name, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {target!r}: {exc}") from exc


@dataclass(frozen=True)
class Evaluation:
    """How a job is measured against a labelled golden set.

    ``measures``: the figures every report of the job carries under ``metrics``, as canonical
    measure strings (:mod:`evidex.evaluate.measures`), the headline first; gates and tests read
    them by these names. ``golden``: the golden-set row type (a model of
    :mod:`evidex.evaluate.golden`). ``evaluator``: the class that predicts, scores and renders
    (:class:`evidex.evaluate.registry.Evaluator`). ``calibrate``: the function behind
    ``evidex calibrate JOB``, for jobs with something to fit. ``from_reviews``: whether resolved
    review items become golden rows (``evidex review export``); how one decision does is the
    job's ``review`` side, so every job exports through the same function.
    """

    measures: tuple[str, ...]
    golden: str
    evaluator: str
    calibrate: str | None = None
    from_reviews: bool = True

    def golden_type(self) -> type[BaseModel]:
        """The golden-set row model."""
        found = import_path(self.golden)
        if not (isinstance(found, type) and issubclass(found, BaseModel)):
            raise ConfigError(f"{self.golden} is not a golden-set row model")
        return found

    def make_evaluator(self) -> Any:
        """A new instance of the job's evaluator."""
        return import_path(self.evaluator)()

    def calibrator(self) -> Callable[..., Any] | None:
        """The calibration function, or None when the job has nothing to fit."""
        return None if self.calibrate is None else _callable(self.calibrate)


def _callable(target: str) -> Callable[..., Any]:
    found = import_path(target)
    if not callable(found):
        raise ConfigError(f"{target} is not a function")
    return found  # type: ignore[no-any-return]
