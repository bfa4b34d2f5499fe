"""The plug-in folders attacks/ and defenses/ are installed as bngp.attacks and bngp.defenses,
never under the generic top-level names that a user's own folders would shadow."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [path for folder in ("bngp", "attacks", "defenses", "experiments", "tests") for path in (ROOT / folder).rglob("*.py")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_module_imports_the_bare_plug_in_names(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        bare = [name for name in names if name.split(".")[0] in ("attacks", "defenses")]
        assert not bare, f"{path.relative_to(ROOT)}:{node.lineno} imports {bare[0]} (use bngp.{bare[0]} or a relative import)"


def test_installed_names(tmp_path):
    """From an empty directory: `import attacks` fails, `import bngp.attacks` works and registers
    the attacks, and bngp.defenses parses a SPEC."""
    code = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('attacks') is None and importlib.util.find_spec('defenses') is None\n"
        "import bngp.attacks, bngp.defenses\n"
        "assert 'linear' in bngp.attacks.available_attacks() and 'laplace' in bngp.defenses.available_defenses()\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_every_package_on_disk_is_installed():
    """pyproject.toml lists packages explicitly (attacks/ and defenses/ are remapped), so a new
    sub-package left out of the list would be missing from a non-editable install."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "bngp").rglob("__init__.py")}
    on_disk |= {"bngp.attacks", "bngp.defenses"}
    assert on_disk == listed, f"missing: {sorted(on_disk - listed)}, stale: {sorted(listed - on_disk)}"


def test_adult_files_are_package_data():
    """The UCI Adult rows ship inside the package (bngp.data.adult reads them at run time)."""
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["bngp.data"]
    shipped = {path.name for path in (ROOT / "bngp" / "data" / "adult_files").iterdir()}
    matched = {name for name in shipped if any(Path(name).match(pattern.split("/")[-1]) for pattern in patterns)}
    assert shipped and matched == shipped, sorted(shipped - matched)


def test_every_package_is_listed_in_pyproject():
    """A wheel holds only the packages pyproject.toml lists: every folder with an __init__.py under bngp/,
    attacks/ and defenses/ must be there, or a non-editable install misses it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for folder, name in (("bngp", "bngp"), ("attacks", "bngp.attacks"), ("defenses", "bngp.defenses")):
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    assert found <= listed, f"missing from pyproject.toml's packages: {sorted(found - listed)}"


def test_every_public_name_resolves():
    """Every name of ``bngp.__all__`` is importable from the package (each lazy export names its home module)."""
    import bngp

    for name in bngp.__all__:
        assert getattr(bngp, name) is not None, name
