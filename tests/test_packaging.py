"""What the package ships: the ``py.typed`` marker (PEP 561), so type checkers read evidex's
annotations in a user's project instead of treating it as untyped."""

from __future__ import annotations

import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_has_a_py_typed_marker() -> None:
    assert resources.files("evidex").joinpath("py.typed").is_file()


def test_the_wheel_ships_the_whole_package_directory() -> None:
    """hatchling puts every file of a listed package in the wheel unless told otherwise: the
    marker ships as long as nothing excludes it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["src/evidex"]
    assert not {"exclude", "only-include", "include"} & set(wheel)
    assert not config["tool"]["hatch"]["build"].get("exclude")


def test_a_built_wheel_holds_py_typed(tmp_path: Path) -> None:
    hatchling_wheel = pytest.importorskip(
        "hatchling.builders.wheel", reason="hatchling (the build backend) is not installed"
    )
    builder = hatchling_wheel.WheelBuilder(str(ROOT))
    [built] = list(builder.build(directory=str(tmp_path), versions=["standard"]))
    with zipfile.ZipFile(built) as wheel:
        assert "evidex/py.typed" in wheel.namelist()
