"""Problem sizes and budgets of the reproduction runs (arXiv:2410.07414, section 5 and App. L).

A reproduction runs at one of three scales:

* ``quick``: a few training steps on tiny populations; every experiment finishes in well under a
  minute on one core.  It checks the whole pipeline (data, game, attacks, reports); its AUCs
  carry no meaning and the reports say so.
* ``small``: the paper's setups shrunk (genome K 200, N 100, |Q| 1000), minutes per training.
* ``paper``: the paper's sizes (genome K 800, N 400, |Q| 5000 as in App. L.1) with the game's
  default budgets (1500 defender steps, 1500-step Bayesian attacker, 100 evaluation releases).

:class:`Sizes` is the population of one experiment at one scale (each experiment declares its
own, e.g. Fig. 2b keeps |Q| = 100 at every scale); :class:`Budget` the training and evaluation
budgets, shared by every experiment of a scale and overridable from the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bngp.errors import InputError

__all__ = ["SCALES", "Sizes", "Budget", "BUDGETS", "budget_for"]

#: the scales, smallest first.
SCALES = ("quick", "small", "paper")


@dataclass(frozen=True)
class Sizes:
    """The population of one experiment at one scale.

    Attributes:
        individuals: K, the individuals who may be members.
        members: N, dataset size (the prior draws N of K uniformly, section 2.2).
        reference: R, the disjoint reference panel (p_bar of the LRT and score attacks).
        attributes: |Q| for simulated genomes; ``None`` for data sets whose attributes are fixed
            by their encoding (Adult: 120, images: 10 classes x confidence bins).
    """

    individuals: int
    members: int
    reference: int
    attributes: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.members < self.individuals or self.reference < 1:
            raise InputError(f"sizes need 0 < N < K and R >= 1, got N {self.members}, K {self.individuals}, "
                             f"R {self.reference}.")
        if self.attributes is not None and self.attributes < 1:
            raise InputError(f"`attributes` must be >= 1, got {self.attributes}.")

    def describe(self) -> str:
        """``K 800, N 400, |Q| 5000, reference 800`` (|Q| left out when the data set fixes it)."""
        snvs = "" if self.attributes is None else f", |Q| {self.attributes}"
        return f"K {self.individuals}, N {self.members}{snvs}, reference {self.reference}"


@dataclass(frozen=True)
class Budget:
    """Training and evaluation budgets of a scale.

    Attributes:
        steps: defender updates of each training (``GameConfig.steps``).
        fresh_check_steps: steps of the trainer's end-of-training fresh attacker.
        attacker_eval_steps: training steps of the evaluation's Bayesian attacker (BNGP(A)).
        releases: R, evaluation releases (the AUC std is over these).
        eval_every: held-out evaluations of the trainer (collapse check) every this many steps.
        checkpoint_every: trainer checkpoints every this many steps (a paper-scale run is resumed
            from its last checkpoint when restarted).
    """

    steps: int
    fresh_check_steps: int
    attacker_eval_steps: int
    releases: int
    eval_every: int
    checkpoint_every: int

    def __post_init__(self) -> None:
        for name in ("steps", "attacker_eval_steps", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise InputError(f"`{name}` must be >= 1, got {getattr(self, name)}.")
        if self.fresh_check_steps < 0:
            raise InputError(f"`fresh_check_steps` must be >= 0, got {self.fresh_check_steps}.")
        if self.releases < 2:
            raise InputError(f"`releases` must be >= 2, got {self.releases}.")


#: ``paper``: GameConfig's and AttackerTrainingConfig's defaults (App. L.8 budgets), 100 releases.
BUDGETS: dict[str, Budget] = {
    "quick": Budget(steps=6, fresh_check_steps=4, attacker_eval_steps=8, releases=4, eval_every=3, checkpoint_every=6),
    "small": Budget(steps=1200, fresh_check_steps=600, attacker_eval_steps=1000, releases=50, eval_every=50,
                    checkpoint_every=250),
    "paper": Budget(steps=1500, fresh_check_steps=1000, attacker_eval_steps=1500, releases=100, eval_every=50,
                    checkpoint_every=250),
}


def budget_for(scale: str, *, steps: int | None = None, attacker_steps: int | None = None,
               releases: int | None = None) -> Budget:
    """The budget of ``scale`` with the given overrides (``attacker_steps`` sets both the
    evaluation's Bayesian attacker and the trainer's fresh-attacker check)."""
    if scale not in BUDGETS:
        raise InputError(f"`--scale` must be one of {', '.join(SCALES)}, got {scale!r}.")
    changes = {"steps": steps, "attacker_eval_steps": attacker_steps, "fresh_check_steps": attacker_steps,
               "releases": releases}
    return replace(BUDGETS[scale], **{name: value for name, value in changes.items() if value is not None})
