"""Docstrings and comments state contracts, not history: no dates, measured timings or development words.

Every product module (``bngp/**``, ``attacks/**``, ``defenses/**``) is parsed with :mod:`ast` (its
docstrings) and :mod:`tokenize` (its comments), and each line is matched against the patterns
below.  Measurements and the reasoning behind defaults belong in ``docs/design/``, the history of
the project in ``CHANGELOG.md``.  ``README.md`` and ``docs/`` are checked for the development words
and dates too (they describe the product as it is), and so are the experiment scripts' docstrings and
comments and the committed result reports for the development words (a report may carry the date of
its run).

The timing patterns match a number followed by a unit of time or of throughput ("77 s of a refit",
"3.0 ms", "40 seconds", "199 GFLOP/s", "1.8x faster"); a unit alone ("seconds per call", "GFLOP
counted from the layer sizes") or a symbol next to a number in mathematics ("2 s_j", "eps") is not a
measurement and does not match.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT_DIRECTORIES = ("bngp", "attacks", "defenses")
#: documents that describe the product as it is (``CHANGELOG.md`` is its history and is not checked).
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
#: the experiment scripts and the reports they committed.
EXPERIMENT_SCRIPTS = tuple(sorted((ROOT / "experiments").rglob("*.py")))
RESULT_REPORTS = tuple(sorted((ROOT / "experiments" / "results").rglob("*.md")))

_NUMBER = r"(?<![\w.])\d+(?:[.,]\d+)*"
#: calendar dates.
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
#: a number followed by a unit of time, of throughput or a speed-up: a measurement.
TIMING = re.compile(
    _NUMBER + r"\s*(?:"
    r"(?<=\s)s(?=[\s,.;:)\]]|$)"                           # "77 s of", "(0.8 s)", not "(2s)"
    r"|ms\b|µs\b|us\b|ns\b"
    r"|sec\b|secs\b|seconds?\b|minutes?\b|mins?\b|hours?\b"
    r"|[GTM]FLOP(?:/s|S)?\b"                               # "199 GFLOP/s", "81 GFLOP"
    r"|(?:x|×|times)\s+(?:faster|slower|the\s+speed)\b"    # "1.8x faster", "3 times faster"
    r")",
    re.IGNORECASE,
)
#: how the project was developed: work sessions, issue numbers, former values and defaults.
DEVELOPMENT = re.compile(
    r"\bsessions?\b"
    r"|\bissues?\s*#?\s*\d+"
    r"|\bwas\s+\d"                                         # "it was 64"
    r"|\b(?:before|until|since|after)\s+20\d\d\b"           # "before 2026-11-27"
    r"|\b(?:it|this|they|we|which|that|default|defaults|code)\s+used\s+to\b|\bused\s+to\s+be\b"
    r"|\bbefore\s+(?:these|this)\s+changes?\b"
    r"|\bcommit\s+[0-9a-f]{7,40}\b",
    re.IGNORECASE,
)
PRODUCT_PATTERNS = {"date": DATE, "timing": TIMING, "development": DEVELOPMENT}
DOCUMENT_PATTERNS = {"date": DATE, "development": DEVELOPMENT}


def product_files() -> list[Path]:
    return sorted(path for directory in PRODUCT_DIRECTORIES for path in (ROOT / directory).rglob("*.py"))


def _docstring_lines(tree: ast.Module) -> list[tuple[int, str]]:
    """(line number, text) of every line of every module, class and function docstring."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            first = body[0].value.lineno
            lines += [(first + offset, text) for offset, text in enumerate(body[0].value.value.splitlines())]
    return lines


def _comment_lines(source: str) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]


def violations(text_lines: list[tuple[int, str]], patterns: dict[str, re.Pattern], where: str) -> list[str]:
    """``where:line: kind: 'match' in text`` for every match of every pattern."""
    found = []
    for number, text in text_lines:
        for kind, pattern in patterns.items():
            for match in pattern.finditer(text):
                found.append(f"{where}:{number}: {kind}: {match.group(0)!r} in {text.strip()[:120]!r}")
    return found


@pytest.mark.parametrize("path", product_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_product_docstrings_and_comments_hold_no_history(path: Path) -> None:
    source = path.read_text()
    lines = _docstring_lines(ast.parse(source)) + _comment_lines(source)
    found = violations(lines, PRODUCT_PATTERNS, str(path.relative_to(ROOT)))
    assert not found, "measurements, dates and history belong in docs/design/ or CHANGELOG.md:\n" + "\n".join(found)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_documents_speak_of_the_product_not_of_its_development(path: Path) -> None:
    lines = list(enumerate(path.read_text().splitlines(), start=1))
    found = violations(lines, DOCUMENT_PATTERNS, str(path.relative_to(ROOT)))
    assert not found, "the history of the project belongs in CHANGELOG.md:\n" + "\n".join(found)


@pytest.mark.parametrize("path", EXPERIMENT_SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_experiment_scripts_speak_of_the_experiment_not_of_its_development(path: Path) -> None:
    source = path.read_text()
    lines = _docstring_lines(ast.parse(source)) + _comment_lines(source)
    found = violations(lines, {"development": DEVELOPMENT}, str(path.relative_to(ROOT)))
    assert not found, "the history of the project belongs in CHANGELOG.md:\n" + "\n".join(found)


def test_result_reports_speak_of_the_results_not_of_their_development() -> None:
    found = [hit for path in RESULT_REPORTS
             for hit in violations(list(enumerate(path.read_text().splitlines(), start=1)), {"development": DEVELOPMENT},
                                   str(path.relative_to(ROOT)))]
    assert RESULT_REPORTS, "no committed result report found"
    assert not found, "the history of the project belongs in CHANGELOG.md:\n" + "\n".join(found)


@pytest.mark.parametrize("text", [
    "the refit takes 77 s of a paper-scale run", "(0.8 s)", "3.0 ms a call", "40 seconds", "2 minutes",
    "at 199 GFLOP/s", "81 GFLOP counted", "1.8x faster", "3 times faster",
])
def test_the_timing_pattern_catches_measurements(text: str) -> None:
    assert TIMING.search(text)


@pytest.mark.parametrize("text", [
    "seconds per call", "GFLOP counted from the layer sizes", "2 s_j + 1", "Delta_2/(2s) - eps s", "eps = 3", "10 seeds",
    "the steps of 1,500", "x_1 s", "f(D) = b Z / N", "K = 800 individuals",
])
def test_the_timing_pattern_leaves_units_and_mathematics_alone(text: str) -> None:
    assert not TIMING.search(text)


@pytest.mark.parametrize("text", [
    "measured in the tenth session", "see issue 17", "issue #51", "it was 64", "before 2026-11-27",
    "the default used to be 500", "before these changes",
])
def test_the_development_pattern_catches_history(text: str) -> None:
    assert DEVELOPMENT.search(text)


@pytest.mark.parametrize("text", ["the generator used to draw the releases", "an issue of the input", "it was fitted"])
def test_the_development_pattern_leaves_plain_words_alone(text: str) -> None:
    assert not DEVELOPMENT.search(text)
