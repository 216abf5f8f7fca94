"""The README's table of presets agrees with ``suite.datasets.presets``: every preset has a row, with its shape."""

import re
from pathlib import Path

from suite.datasets.presets import PRESETS

README = Path(__file__).resolve().parents[3] / "README.md"


def _rows() -> dict[str, dict[str, str]]:
    """Each preset named in the README's table, with the cells of its row (a row may name several presets, its
    nodes column then listing theirs in order)."""
    lines = README.read_text().splitlines()
    start = lines.index("| preset | imitates | generator | nodes | D | C | labelled |")
    header = [cell.strip() for cell in lines[start].split("|")[1:-1]]
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = dict(zip(header, (cell.strip() for cell in line.split("|")[1:-1])))
        names = re.findall(r"`([^`]+)`", cells["preset"])
        nodes = cells["nodes"].split(", ")
        for k, name in enumerate(names):
            rows[name] = {**cells, "nodes": nodes[k] if len(nodes) == len(names) else cells["nodes"]}
    return rows


def _count(text: str) -> tuple[float, float]:
    """``262,144`` (exact) or ``8.4 M`` (to 0.05 M): the count and how far from it the README may round."""
    return (float(text[:-2]) * 1e6, 0.05e6) if text.endswith(" M") else (float(text.replace(",", "")), 0)


def test_every_preset_has_a_row_in_the_readme_with_its_shape():
    rows = _rows()
    assert sorted(rows) == sorted(PRESETS)
    for name, preset in PRESETS.items():
        row = rows[name]
        nodes, rounding = _count(row["nodes"])
        assert abs(nodes - preset.num_nodes) <= rounding, name
        assert (int(row["D"]), int(row["C"])) == (preset.feature_dim, preset.num_classes), name
        labelled = float(re.match(r"[0-9.]+", row["labelled"]).group()) / 100
        assert abs(labelled - preset.num_labeled / preset.num_nodes) < 0.0005, name
