"""Small modules and short functions: no product module over 500 lines, no function over 80 lines.

Read from the source (no code is run), over ``bngp/``, ``attacks/`` and ``defenses/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES, FUNCTION_LINES = 500, 80
SOURCES = sorted(path for folder in ("bngp", "attacks", "defenses") for path in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_module_and_functions_are_small(path):
    text = path.read_text()
    lines = text.count("\n")
    assert lines <= MODULE_LINES, f"{path.relative_to(ROOT)} has {lines} lines (at most {MODULE_LINES})"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
            for node in ast.walk(ast.parse(text, filename=str(path)))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > FUNCTION_LINES]
    assert not long, f"{path.relative_to(ROOT)}: functions over {FUNCTION_LINES} lines: {', '.join(long)}"

