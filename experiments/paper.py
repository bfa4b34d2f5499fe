"""Shared machinery of the runners that reproduce the result tables of arXiv:2410.07414 (App. L.9).

Each runner (``table3_kappa.py``, ``table4_defenders.py``, ``table5_composition.py``,
``attack_strength.py``) is a thin configuration on top of :class:`Experiment`, which

1. simulates the genome population once per run (stdpopsim CEU chr10 stand-in for the
   paper's iDASH / 1000 Genomes chromosome 10, :func:`bngp.data.genome.simulate_genome`) at a
   :class:`Scale` (``paper`` = K 800, N 400, |Q| 5000; ``small`` and ``tiny`` for quick checks)
   with the "n of K" membership prior (section 2.2);
2. trains BNGP defenders with :class:`bngp.game.Game` into ``runs/<scale>_seed<S>/<label>/``
   (a completed run with the same configuration and population is reused, an interrupted
   one is resumed from its checkpoint, so a long paper-scale table can be restarted);
3. evaluates defenses with :func:`bngp.evaluate.evaluate_defense` on the same evaluation
   memberships for every setting of a table (paired comparisons), timing each attack;
4. writes ``<scale>_seed<S>.json`` (every number, seed, configuration, wall time and
   package version), ``<scale>_seed<S>.md`` (our AUC +- std next to the paper's, each
   attack's knowledge statement, warnings) and ``<scale>_seed<S>.png`` (the same comparison
   as a bar chart) into ``experiments/results/<table>/`` or ``--out DIR``, atomically.

Orientation (:mod:`bngp.evaluate`): every AUC we report is that of the attack in the direction
it fixed from its own shadow data; the paper's tables show some attacks' raw direction (e.g.
adaptive LRT 0.1552), so the reports also give our AUC in the raw direction next to it.

The machinery lives in ``scales.py`` (:class:`Scale`, :data:`SCALES`, :func:`parse_args`),
``experiment.py`` (:class:`Experiment`) and ``report.py`` (:class:`Row`, the reports); this
module gathers the names the runners import.
"""

from __future__ import annotations

from experiment import RESULTS_DIR, Experiment, typical_replacement_l2
from report import PaperAUC, Row, environment
from scales import SCALES, Scale, parse_args

__all__ = [
    "Scale",
    "SCALES",
    "RESULTS_DIR",
    "PaperAUC",
    "Row",
    "Experiment",
    "parse_args",
    "typical_replacement_l2",
    "environment",
]
