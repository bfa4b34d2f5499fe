"""Problem sizes of the table runners and their common command line.

A :class:`Scale` fixes the population (K, N, |Q|, reference panel) and the training and
evaluation budgets of one run; :data:`SCALES` holds ``paper`` (the genome setup of
arXiv:2410.07414, App. L), ``small`` and ``tiny``.  :func:`parse_args` is the runners' shared
command line and :func:`scale_from_args` the scale it selects, with the budgets it overrides.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

__all__ = ["Scale", "SCALES", "parse_args", "scale_from_args"]


@dataclass(frozen=True)
class Scale:
    """Problem sizes and training/evaluation budgets of one scale.

    Attributes:
        name: "tiny", "small" or "paper".
        individuals: K, individuals who may be members.
        members: N, dataset size (the prior draws N of K uniformly).
        snvs: |Q|, released SNVs.
        reference: size of the disjoint reference panel (p_bar for the LRT attacks).
        steps: defender updates of each training (GameConfig.steps).
        fresh_check_steps: steps of the trainer's end-of-training fresh attacker.
        attacker_eval_steps: training steps of the evaluation's Bayesian attacker (BNGP(A)).
        releases: R, evaluation releases (the AUC std is over these).
        eval_every: held-out evaluations of the trainer (collapse check) every this many steps.
        checkpoint_every: trainer checkpoints every this many steps.
    """

    name: str
    individuals: int
    members: int
    snvs: int
    reference: int
    steps: int
    fresh_check_steps: int
    attacker_eval_steps: int
    releases: int
    eval_every: int
    checkpoint_every: int


#: ``paper``: the genome setup of arXiv:2410.07414 (App. L) with GameConfig's and
#: AttackerTrainingConfig's default budgets; ``small``: K 200, N 100, |Q| 1000 (minutes on one
#: core per training); ``tiny``: K 40, N 20, |Q| 120, a few steps (smoke tests; the numbers mean nothing).
SCALES: dict[str, Scale] = {
    "tiny": Scale("tiny", 40, 20, 120, 40, steps=6, fresh_check_steps=4, attacker_eval_steps=8,
                  releases=4, eval_every=3, checkpoint_every=6),
    "small": Scale("small", 200, 100, 1000, 200, steps=1200, fresh_check_steps=600, attacker_eval_steps=1000,
                   releases=50, eval_every=50, checkpoint_every=250),
    "paper": Scale("paper", 800, 400, 5000, 800, steps=1500, fresh_check_steps=1000, attacker_eval_steps=1500,
                   releases=100, eval_every=50, checkpoint_every=250),
}


def parse_args(
    doc: str, argv: Sequence[str] | None = None, configure: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The runners' common command line: ``--scale``, ``--out``, ``--seed``, ``--threads``,
    ``--steps`` (override the scale's training steps); ``configure`` adds a runner's own options."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--scale", choices=list(SCALES), default="small", help="problem size (default: small)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: experiments/results/<table>)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the population, trainings and evaluations")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument("--steps", type=int, default=None, help="defender training steps (default: the scale's)")
    parser.add_argument("--attacker-steps", type=int, default=None,
                        help="training steps of the evaluation's and the fresh-check's Bayesian attackers (default: the scale's)")
    parser.add_argument("--releases", type=int, default=None, help="evaluation releases (default: the scale's)")
    if configure is not None:
        configure(parser)
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f"`--seed` must be >= 0, got {args.seed}.")
    for name in ("steps", "attacker_steps", "releases"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"`--{name.replace('_', '-')}` must be >= 1, got {value}.")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"`--threads` must be >= 1, got {args.threads}.")
        torch.set_num_threads(args.threads)
    return args


def scale_from_args(args: argparse.Namespace) -> Scale:
    """The scale of ``--scale`` with the budgets given on the command line (--steps, --attacker-steps, --releases)."""
    changes = {"steps": args.steps, "attacker_eval_steps": args.attacker_steps,
               "fresh_check_steps": args.attacker_steps, "releases": args.releases}
    return replace(SCALES[args.scale], **{name: value for name, value in changes.items() if value is not None})
