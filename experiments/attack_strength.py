"""Attack strength: every attack, reconstruction vs the default Bayesian attacker, with wall times.

Against no defense and against Laplace noise of mean magnitude 0.01 (``laplace:scale=0.01``,
E|xi_j| = b = 0.01), every attack whose knowledge the evaluation can provide is fitted and
scored on the same evaluation releases, with the wall time of each (fit + score).  At the
paper's scale (K 800, N 400, |Q| 5000; arXiv:2410.07414, App. L) the question is whether
least-squares reconstruction from the known population beats the default Bayesian attacker
(1500 training steps).  The paper reports no numbers for this comparison.

Usage: python experiments/attack_strength.py --scale small|paper [--steps S] [--out DIR] [--seed S] [--threads T]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from paper import Experiment, parse_args

DEFENSES = ("none", "laplace:scale=0.01")


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate all applicable attacks against each defense, write the report."""
    experiment = Experiment("attack_strength", __doc__, parse_args(__doc__, argv))
    experiment.settings.update(defenses=list(DEFENSES))
    for spec in DEFENSES:
        defense = experiment.defense(spec)
        experiment.evaluate(spec, defense, experiment.applicable_attacks(defense), {})
    experiment.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
