"""docs/development.md's layout names every module and package of perflab/ (issue 38): a module
added without a line there fails here, with the names to add."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_layout_names_every_module():
    layout = (ROOT / "docs" / "development.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    missing = []
    for path in sorted((ROOT / "perflab").rglob("*.py")):
        name = path.relative_to(ROOT / "perflab")
        if path.name == "__init__.py":
            if len(name.parts) > 1 and f"{name.parts[-2]}/" not in layout:
                missing.append(f"{name.parent}/")
        elif path.name not in layout:
            missing.append(str(name))
    assert not missing, f"docs/development.md's layout does not name: {', '.join(missing)}"
