"""Taxonomy loading: the accepted shapes, and clear errors naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from evidex.errors import InputError
from evidex.taxonomy import LabelDefinition, Taxonomy


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "a.yaml",
            "labels:\n  - name: A\n    description: first\n  - name: B\n    description: second\n",
        ),
        ("b.yaml", "- {label: A, definition: first}\n- {name: B, description: second}\n"),
        ("c.yml", "A: first\nB: second\n"),
        (
            "d.json",
            '{"labels": [{"name": "A", "description": "first"}, '
            '{"name": "B", "description": "second"}]}',
        ),
    ],
)
def test_every_shape_loads_the_same_taxonomy(tmp_path: Path, name: str, text: str) -> None:
    taxonomy = Taxonomy.from_file(write(tmp_path, name, text))
    assert taxonomy.labels == (
        LabelDefinition(name="A", description="first"),
        LabelDefinition(name="B", description="second"),
    )
    assert taxonomy.render() == "- A: first\n- B: second"


@pytest.mark.parametrize("text", ["labels: []\n", "[]\n", "{}\n", ""])
def test_an_empty_taxonomy_is_an_input_error(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "t.yaml", text)
    with pytest.raises(InputError, match="at least one") as info:
        Taxonomy.from_file(path)
    assert str(path) in str(info.value)


def test_yaml_that_does_not_parse_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", "A: first\nB: [unclosed\nC: third\n")
    with pytest.raises(InputError, match="not valid YAML") as info:
        Taxonomy.from_file(path)
    assert info.value.where is not None and info.value.where.startswith(f"{path}:")
    assert info.value.where.rsplit(":", 1)[1].isdigit()


def test_json_that_does_not_parse_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "t.json", '{"labels": [\n  {"name": "A",}\n]}')
    with pytest.raises(InputError, match="not valid JSON") as info:
        Taxonomy.from_file(path)
    assert info.value.where == f"{path}:2"


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the taxonomy"):
        Taxonomy.from_file(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"name": "A", "description": "x"}, {"name": "A", "description": "y"}], "repeated: A"),
        ([{"name": "A"}], "labels.0.description"),
        ({"A": "  "}, "empty description"),
        ([{"name": "two words ", "description": "x"}], "without outer spaces"),
        ("A, B", "got str"),
        ([{"name": "A", "description": "x", "colour": "red"}], "colour"),
    ],
)
def test_invalid_taxonomies_say_what_is_wrong(data: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Taxonomy.parse(data, where="labels.yaml")


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("t.yaml", "REFUND: money back\nSHIPPING: delivery\nREFUND: a second meaning\n", 3),
        ("t.json", '{"REFUND": "money back",\n "SHIPPING": "delivery",\n "REFUND": "again"}', 3),
    ],
)
def test_a_label_defined_twice_is_an_error_naming_it(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(InputError, match="'REFUND' is defined twice") as info:
        Taxonomy.from_file(path)
    assert info.value.where == f"{path}:{line}"
