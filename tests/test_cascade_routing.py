"""The cascade's routing rule from options, a file of `evidex calibrate` or the shipped default:
the band or the frontier rule, routing files of format 2, and band files of format 1."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evidex.errors import ConfigError
from evidex.frontier import FrontierRule
from evidex.judges import JUDGES, get_judge
from evidex.judges.cascade import Band, FrontierFile, load_band, load_routing
from tests.scripted import ScriptedJudge
from tests.test_cascade import FakeScorer


@pytest.fixture
def fake_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(JUDGES, "fakecheap", lambda spec, **o: FakeScorer("local:minilm"))
    monkeypatch.setitem(JUDGES, "fakeexp", lambda spec, **o: ScriptedJudge())


def test_the_rule_comes_from_options_a_file_or_the_shipped_default(
    tmp_path: Path, fake_stages: None
) -> None:
    spec = "cascade:fakecheap,fakeexp:m"
    assert get_judge(spec).frontier() is None  # the band, as before
    shipped = get_judge(spec, rule="frontier")
    assert shipped.frontier() == FrontierRule(budget=0.5, start=0.1, step=0.05)
    assert shipped.rule_source == "shipped default" and shipped.warnings == []
    given = get_judge(spec, budget="0.3", start="0.1", step="0.1", width="2")
    assert given.frontier() == FrontierRule(budget=0.3, start=0.1, step=0.1, width=2)
    assert given.rule_source == "options over shipped default"
    path = tmp_path / "cascade_band.json"
    made = FrontierFile(
        frontier=FrontierRule(budget=0.4, start=0.2, step=0.05),
        cheap="local:minilm",
        cheap_version="fake-1",
        expensive="scripted",
        expensive_version="scripted",
        fit={"kappa_out_of_set": 0.3},
    )
    path.write_text(json.dumps(made.model_dump()))
    from_file = get_judge(spec, band_path=str(path))
    assert from_file.frontier() == made.frontier and from_file.rule_source == str(path)
    assert from_file.warnings == [] and load_routing(path) == made
    wider = get_judge(spec, band_path=str(path), width=4)
    assert wider.frontier() == made.frontier.model_copy(update={"width": 4})
    # the band of a frontier cascade stays the shipped one (rerank, the "nothing relevant" edge)
    assert from_file.band == load_band(None, "local:minilm")
    # the fingerprint (cache keys, an evaluation's resume) follows the rule
    assert from_file.fingerprint() != get_judge(spec).fingerprint()


def test_a_frontier_file_fitted_with_other_models_is_stale(
    tmp_path: Path, fake_stages: None
) -> None:
    path = tmp_path / "frontier.json"
    made = FrontierFile(
        frontier=FrontierRule(budget=0.5, start=0.1, step=0.1), cheap_version="other-1"
    )
    path.write_text(json.dumps(made.model_dump()))
    judge = get_judge("cascade:fakecheap,fakeexp:m", band_path=str(path))
    assert len(judge.warnings) == 1 and "stale cascade frontier" in judge.warnings[0]


def test_old_band_files_still_load_and_newer_formats_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "band.json"
    old = {"low": 0.2, "high": None, "cheap": "local:minilm", "cheap_version": "v", "fit": {}}
    path.write_text(json.dumps(old))  # format 1: no format, no rule
    band = load_routing(path)
    assert isinstance(band, Band) and (band.low, band.high) == (0.2, math.inf)
    written = band.to_json()
    assert written["format"] == 2 and written["rule"] == "band"
    path.write_text(json.dumps(written))
    assert load_band(path, "x") == band
    path.write_text(json.dumps({**written, "format": 3}))
    with pytest.raises(ConfigError, match="newer evidex"):
        load_routing(path)
    path.write_text(
        json.dumps(FrontierFile(frontier=FrontierRule(budget=1, start=1, step=1)).model_dump())
    )
    with pytest.raises(ConfigError, match="holds a frontier rule"):
        load_band(path, "x")


def test_bad_frontier_options_are_refused(
    fake_stages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = "cascade:fakecheap,fakeexp:m"
    with pytest.raises(ConfigError, match="band or frontier"):
        get_judge(spec, rule="sideways")
    with pytest.raises(ConfigError, match="not of rule=band"):
        get_judge(spec, rule="band", budget=0.5)
    with pytest.raises(ConfigError, match="start"):
        get_judge(spec, budget=0.2, start=0.3, step=0.1)
    monkeypatch.setitem(JUDGES, "othercheap", lambda spec, **o: FakeScorer("fake:other"))
    with pytest.raises(ConfigError, match="needs start, step"):
        get_judge("cascade:othercheap,fakeexp:m", rule="frontier", budget=0.5)
