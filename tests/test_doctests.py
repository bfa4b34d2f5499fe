"""The docstring examples of every module of bngp, bngp.attacks and bngp.defenses run and hold.

The modules are walked with :mod:`pkgutil` and imported under their installed names
(``bngp.defenses.x``, never the top-level ``defenses.x`` that ``--doctest-modules`` with the
default import mode would create next to it; this module needs no ``--import-mode=importlib``);
each is run through :func:`doctest.testmod` with its default options, as ``python -m doctest``
would.  Only the ``__main__`` entry points are left out (named in ``ENTRY_POINTS``), and the
examples counted must not fall below ``MIN_EXAMPLES``, so the test cannot pass by finding nothing.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

#: examples attempted over all modules when this test was written (the two of
#: bngp.game.trainer are marked +SKIP: they train a 500-step defender into a run directory).
MIN_EXAMPLES = 55
#: modules not imported: importing ``python -m`` entry points runs the command line.
ENTRY_POINTS = {"bngp.cli.__main__"}
#: modules whose docstrings held examples when this test was written.
MODULES_WITH_EXAMPLES = {
    "bngp.metrics",
    "bngp.audit.roc",
    "bngp.audit.many_run",
    "bngp.audit.binomial",
    "bngp.audit.gan_samples",
    "bngp.audit.tradeoff",
    "bngp.audit.bits",
    "bngp.audit.panoramia",
    "bngp.audit.one_run",
    "bngp.audit.order_grid",
    "bngp.audit.fdp_one_run",
    "bngp.audit.tradeoff_curve",
    "bngp.data.adult",
    "bngp.data.genome",
    "bngp.mechanism_audit.dispatch",
    "bngp.mechanism_audit.haplotype_model",
    "bngp.defenses.calibration",
    "bngp.defenses.sensitivity",
    "bngp.defenses.matched",
}


def _module_names() -> list[str]:
    names = []
    for package_name in ("bngp", "bngp.attacks", "bngp.defenses"):
        package = importlib.import_module(package_name)
        names.append(package_name)
        names.extend(info.name for info in pkgutil.walk_packages(package.__path__, prefix=package_name + "."))
    return sorted(set(names))


def test_docstring_examples_run() -> None:
    names = _module_names()
    assert {name for name in names if name.rsplit(".", 1)[-1] == "__main__"} == ENTRY_POINTS
    assert {"bngp.attacks.bayesian", "bngp.defenses.specs", "bngp.audit.roc", "bngp.game.trainer"} <= set(names)
    attempted: dict[str, int] = {}
    failures: list[str] = []
    for name in names:
        if name in ENTRY_POINTS:
            continue
        result = doctest.testmod(importlib.import_module(name), verbose=False, report=False)
        if result.attempted:
            attempted[name] = result.attempted
        if result.failed:
            failures.append(f"{name}: {result.failed} of {result.attempted} examples failed")
    assert not failures, "; ".join(failures) + " (run python -m doctest -v on the module for details)"
    assert MODULES_WITH_EXAMPLES <= set(attempted), sorted(MODULES_WITH_EXAMPLES - set(attempted))
    assert sum(attempted.values()) >= MIN_EXAMPLES, attempted


@pytest.mark.parametrize("name", ["bngp.metrics", "bngp.defenses.calibration"])
def test_a_broken_example_is_reported(name, monkeypatch) -> None:
    """The harness does fail: an example whose expected output is wrong counts as a failure."""
    module = importlib.import_module(name)
    monkeypatch.setattr(module, "__doc__", (module.__doc__ or "") + "\n>>> 1 + 1\n3\n")
    result = doctest.testmod(module, verbose=False, report=False)
    assert result.failed >= 1
