"""Attack strength: every attack, reconstruction vs the default Bayesian attacker, with wall times.

Against no defense and against Laplace noise of mean magnitude 0.01 (``laplace:scale=0.01``,
E|xi_j| = b = 0.01), every attack whose knowledge the evaluation can provide is fitted and
scored on the same evaluation releases, with the wall time of each (fit + score).  At the
paper's scale (K 800, N 400, |Q| 5000; arXiv:2410.07414, App. L) the question is whether
least-squares reconstruction from the known population beats the default Bayesian attacker
(1500 training steps).  The paper reports no numbers for this comparison.  Built on
:mod:`bngp.reproduce` (the machinery of ``bngp reproduce``); the report lands in
``OUT/attack-strength/SCALE_seedS/``.

Usage: python experiments/attack_strength.py [--scale quick|small|paper] [--seed S] [--out DIR] [--threads T]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bngp.cli.common import set_threads
from bngp.reproduce import SCALES, Experiment, ExperimentSpec, budget_for, check_output_root
from bngp.reproduce.catalog import GENOME
from bngp.reproduce.report import write_report

DEFENSES = ("none", "laplace:scale=0.01")


def _run(experiment: Experiment) -> None:
    experiment.settings.update(defenses=list(DEFENSES))
    for spec in DEFENSES:
        defense = experiment.defense(spec)
        experiment.evaluate(spec, defense, experiment.applicable_attacks(defense), {})


SPEC = ExperimentSpec(
    "attack-strength", "Attack strength (beyond arXiv:2410.07414): every attack against no defense and Laplace b = 0.01",
    __doc__.split("\n\n")[1].replace("\n", " "), "genome", GENOME,
    ("The paper reports no numbers for this comparison.",), _run)


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate all applicable attacks against each defense, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=SCALES, default="small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    experiment = Experiment(SPEC, args.scale, args.seed, check_output_root(args.out), budget_for(args.scale))
    SPEC.run(experiment)
    write_report(experiment)
    return 0


if __name__ == "__main__":
    sys.exit(main())
