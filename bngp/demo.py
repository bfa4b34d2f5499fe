"""The end-to-end demonstration behind ``bngp demo``: simulate, train for a utility budget, attack, decide.

1. simulate a small CEU chromosome-10 window (stdpopsim on msprime): K individuals plus a
   reference panel, |Q| SNVs;
2. train a BNGP defender for a utility budget (a fraction of the loss L0 of the data-independent
   release f(theta), arXiv:2410.07414 section 3.3), started from the best reference mechanism at that
   budget (:mod:`bngp.references`);
3. attack the exact release f(D), Laplace noise at the same budget and the defender with the Bayesian
   attacker, the linear attackers fitted to convergence and the analytic attacks, on fresh releases;
4. read the defender's release decision (:mod:`bngp.decision`): its loss against the budget, the
   strongest attack, and matched Laplace, Gaussian and the best reference mechanism at the same loss;
5. write ``report.md`` (opening with the decision), ``summary.json``, ``roc.png`` and the run directory,
   first in ``OUT.incomplete``, renamed to OUT when complete.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bngp.attacks.registry import available_attacks
from bngp.data.genome import simulate_genome
from bngp.data.npz import save_population
from bngp.data.priors import UniformSubsetPrior
from bngp.decision import decide_release, strongest_of_evaluation
from bngp.defenses.budget import BudgetSetting, parse_budget
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.defenses.trained import load_run_defense
from bngp.errors import InputError
from bngp.evaluate import evaluate_defense
from bngp.game import FreshCheckSettings, Game, GameConfig, ObjectiveSettings
from bngp.game.start import start_config
from bngp.references import rank_references
from bngp.io_utils import write_json, write_text
from bngp.outputs import check_new_directory
from bngp.report import evaluation_markdown, plot_roc
from bngp.rng import SeedLike, resolve_seed

__all__ = ["DemoConfig", "run_demo"]

#: the attacks the demonstration runs (those installed).
DEMO_ATTACKS = ("bayesian", "linear", "whitened", "reconstruction", "lrt", "score")


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demonstration (the defaults finish in a few minutes on 2 CPU cores).

    ``budget`` is the utility budget on mean |x - f(D)|: absolute, or a fraction of L0 such as ``"0.5x"``;
    ``seed`` an int, None or a numpy Generator, resolved to the int recorded in the summary.
    """

    individuals: int = 300
    reference: int = 300
    snvs: int = 200
    members: int = 150
    budget: str = "0.5x"
    steps: int = 300
    releases: int = 30
    seed: SeedLike = 0

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise InputError(f"`--steps` must be >= 1, got {self.steps}.")
        if not 1 <= self.members < self.individuals:
            raise InputError(f"`members` must be in [1, {self.individuals - 1}], got {self.members}.")
        if self.releases < 2:
            raise InputError(f"`releases` must be >= 2, got {self.releases}.")
        if isinstance(self.seed, (int, np.integer)) and not isinstance(self.seed, bool) and self.seed < 0:
            raise InputError(f"`--seed` must be >= 0, got {self.seed}.")
        object.__setattr__(self, "seed", resolve_seed(self.seed))  # the concrete seed, recorded in the summary
        parse_budget(self.budget)


def run_demo(out_dir: str | Path, config: DemoConfig = DemoConfig(), progress: bool = True, *,
             force: bool = False) -> dict:
    """Run the demonstration into ``out_dir`` (refused if it exists, unless ``force``) and return the summary."""
    out_dir = check_new_directory("--out", out_dir, force=force)
    staging = out_dir.with_name(out_dir.name + ".incomplete")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    started = time.perf_counter()
    log = print if progress else (lambda *a, **k: None)
    log(f"[1/4] simulating {config.individuals}+{config.reference} CEU genomes, {config.snvs} SNVs (stdpopsim)")
    population = simulate_genome(config.individuals, config.reference, config.snvs, seed=config.seed)
    save_population(population, staging / "population.npz")
    prior = UniformSubsetPrior(config.individuals, config.members)
    setting = BudgetSetting.of(population, config.members)
    budget = setting.resolve(config.budget)
    log(f"[2/4] training a defender for the utility budget {budget.describe()} ({config.steps} steps), started from "
        "the best reference mechanism at that budget")
    ranking = rank_references(population, config.members, budget.given, seed=config.seed, setting=setting,
                              progress=progress)
    game_config = start_config(ranking, GameConfig(
        steps=config.steps, seed=config.seed, objective=ObjectiveSettings(kind="utility-budget", budget=budget.value),
        fresh_check=FreshCheckSettings(steps=0)))
    start_record = {"reference": ranking.best_score.label, "ranking": ranking.to_dict()}
    run_dir = staging / "run-budget"
    Game(population, prior, game_config, start=ranking.best, start_record=start_record).train(
        run_dir, force=True, progress=progress)
    context = DefenseContext(population, config.members)
    laplace_spec = f"budget-laplace:budget={budget.value:.6g}"
    evaluations = [("none", parse_defense_spec("none", context)),
                   (laplace_spec, parse_defense_spec(laplace_spec, context)),
                   ("run:run-budget", load_run_defense(run_dir, context))]
    attacks = [name for name in DEMO_ATTACKS if name in available_attacks()]
    summary: dict = {"config": asdict(config), "budget": budget.to_dict(), "defenses": {}}
    sections, curves, payload = [], {}, {}
    for spec, defense in evaluations:
        log(f"[3/4] attacking `{spec}` with {', '.join(attacks)}")
        result = evaluate_defense(population, prior, defense, attacks, releases=config.releases,
                                  seed=config.seed + 1, n_members=config.members, progress=progress)
        payload = result.to_dict()
        summary["defenses"][spec] = payload
        sections.append(evaluation_markdown(result, title=f"Defense `{spec}`"))
        strongest = payload["strongest_attack"]["name"]
        curves[f"{spec.split(':')[0]} / {strongest}"] = (result.scores[strongest], result.labels)
    log("[4/4] reading the defender's release decision")
    decision = decide_release(population, config.members, evaluations[-1][1], strongest=strongest_of_evaluation(payload),
                              budget=budget, seed=config.seed, setting=setting, ranking=ranking, progress=progress)
    summary["decision"] = decision.to_dict()
    plot_roc(curves, staging / "roc.png", title="Strongest attack per defense")
    summary["seconds"] = time.perf_counter() - started
    header = [
        "# bngp demo",
        "",
        f"Population: {config.individuals} simulated CEU individuals (chr10 window, stdpopsim OutOfAfrica_3G09), "
        f"{config.reference} reference individuals, {population.n_attributes} SNVs; datasets of {config.members} members "
        f"drawn uniformly. The defender `run-budget/` was trained for the utility budget {budget.describe()}. "
        f"Seed {config.seed}; wall time {summary['seconds']:.0f} s.",
        "",
        "Lower AUC = more privacy. Each release is as private as its strongest attack shows.",
        "",
        *decision.markdown_lines(),
        "![ROC of the strongest attack per defense](roc.png)",
        "",
    ]
    write_text(staging / "report.md", "\n".join(header) + "\n" + "\n".join(sections))
    write_json(staging / "summary.json", summary)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    staging.rename(out_dir)
    log(f"wrote {out_dir / 'report.md'} ({summary['seconds']:.0f} s)")
    log("\n".join(decision.summary_lines()))
    return summary
