"""The layer rule of the package, read from the source's imports (no code is run).

Each component imports only from its own modules and from components on lower lines:

    experiments
    bngp.cli
    bngp.reproduce                                       the paper's experiments (the frontier runs a sweep)
    bngp.demo, bngp.sweep
    bngp.decision                                        a release against the mechanisms at its utility
    bngp.game, bngp.evaluate, bngp.mechanism_audit      the only places where attacks meet defenses
    bngp.references                                      the reference mechanisms ranked by a converged linear attack
    bngp.attacks | bngp.defenses                         siblings: never import each other
    bngp.audit, bngp.release, bngp.linear, bngp.report   bngp.linear: the closed-form linear fits
    bngp.metrics, bngp.data, bngp.workers,               bngp.workers: the helper process a caller hands to a fit;
      bngp.evaluation_record                             the EVAL.json record, below bngp.report, which renders it
    bngp.validation, bngp.rng, bngp.run_dir, bngp.device, bngp.outputs, bngp.threads
    bngp.errors, bngp.io_utils, bngp.timing, bngp.colours

and the module graph has no cycles.  ``bngp.audit`` (scores -> bounds) needs only numpy/scipy.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS = {
    "bngp.errors": 0, "bngp.io_utils": 0, "bngp.timing": 0, "bngp.colours": 0,
    "bngp.validation": 1, "bngp.rng": 1, "bngp.run_dir": 1, "bngp.device": 1, "bngp.outputs": 1, "bngp.threads": 1,
    "bngp.metrics": 2, "bngp.data": 2, "bngp.workers": 2, "bngp.evaluation_record": 2,
    "bngp.audit": 3, "bngp.release": 3, "bngp.linear": 3, "bngp.report": 3,
    "bngp.attacks": 4, "bngp.defenses": 4,
    "bngp.references": 5,
    "bngp.game": 6, "bngp.evaluate": 6, "bngp.mechanism_audit": 6,
    "bngp.decision": 7,
    "bngp.demo": 8, "bngp.sweep": 8,
    "bngp.reproduce": 9,
    "bngp.cli": 10,
    "experiments": 11,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in ("attacks", "defenses"):
        parts = ["bngp", *parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _component(module: str) -> str | None:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return None


def _graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (relative imports resolved)."""
    paths = [p for folder in ("bngp", "attacks", "defenses", "experiments") for p in (ROOT / folder).rglob("*.py")]
    graph: dict[str, set[str]] = {}
    for path in paths:
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets.add(target)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[module] = {t for t in targets if _component(t) is not None and t != module}
    return graph


GRAPH = _graph()


def test_the_graph_is_read():
    """Guard against a vacuous pass: the graph holds the packages and their known arrows."""
    assert len(GRAPH) > 80
    assert "bngp.attacks.base" in GRAPH["bngp.evaluate"]
    assert any(t.startswith("bngp.defenses") for t in GRAPH["bngp.game.trainer"])


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_follow_the_layers(module):
    own = _component(module)
    if own is None:  # the top-level bngp package: lazy re-exports only
        return
    for target in GRAPH[module]:
        other = _component(target)
        if other == own:
            continue
        assert {own, other} != {"bngp.attacks", "bngp.defenses"}, f"{module} imports {target}: attacks and defenses never meet"
        assert LAYERS[other] < LAYERS[own], (
            f"{module} (layer {LAYERS[own]}) imports {target} (layer {LAYERS[other]})"
        )


def test_no_import_cycles():
    """Tarjan-free check: repeatedly drop modules that import nothing left; what remains is cyclic."""
    remaining = {module: {t for t in targets if t in GRAPH} for module, targets in GRAPH.items()}
    for module in list(remaining):  # a package's __init__ re-exporting its own modules is not a cycle
        remaining[module] = {t for t in remaining[module] if not module.startswith(t + ".")}
    changed = True
    while changed:
        changed = False
        for module in [m for m, targets in remaining.items() if not targets]:
            del remaining[module]
            for targets in remaining.values():
                targets.discard(module)
            changed = True
    assert not remaining, f"import cycle among {sorted(remaining)}"


def test_score_audits_import_neither_torch_nor_the_plug_ins(tmp_path):
    code = "import sys, bngp.audit; bad = [m for m in ('torch', 'bngp.attacks', 'bngp.defenses') if m in sys.modules]; print(bad)"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr
