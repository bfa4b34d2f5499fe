"""The shared setting of a table runner: population, prior, trained defenders and evaluations.

An :class:`Experiment` simulates the genome population once per run, with the "n of K"
membership prior (arXiv:2410.07414, section 2.2); trains BNGP defenders into
``runs/<scale>_seed<S>/<label>/`` (reusing a completed run, resuming an interrupted one);
evaluates defenses on the same evaluation memberships for every setting of a table, adding one
:class:`report.Row` per attack; and writes its reports with :func:`report.write_report`.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bngp.attacks.base import Attack, attack_knowledge
from bngp.attacks.bayesian import BayesianAttack
from bngp.attacks.registry import applicable_attacks, get_attack
from bngp.attacks.training import AttackerTrainingConfig
from bngp.data.genome import simulate_genome
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import Defense, DefenseContext, load_run_defense, parse_defense_spec
from bngp.defenses.artifact import population_fingerprint
from bngp.errors import BNGPError
from bngp.evaluate import evaluate_defense
from bngp.game import CHECKPOINT_FILE, CONFIG_FILE, SUMMARY_FILE, Game, GameConfig, TrainingSummary
from bngp.run_dir import staging_dir, verify_run
from report import PaperAUC, Row, format_auc, write_report
from scales import scale_from_args

__all__ = ["RESULTS_DIR", "Experiment", "typical_replacement_l2"]

#: default output root: ``experiments/results/<table>/``.
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def typical_replacement_l2(population: Population, members: int) -> float:
    """Typical l2 change of the frequency vector when one member is replaced by another.

    Delta = sqrt(2 sum_j p_j (1 - p_j)) / N with p_j the carrier frequency in the population:
    E ||d_k - d_k'||^2 = 2 sum_j p_j (1 - p_j) for two random individuals.  A Gaussian
    mechanism N(0, s^2) then separates a typical pair with the Gaussian-DP parameter
    mu = Delta / s, a scale-free measure of its strength used to set Table 5's constant C.
    """
    frequencies = population.genotypes.mean(axis=0, dtype=np.float64)
    return float(math.sqrt(2.0 * np.sum(frequencies * (1.0 - frequencies))) / members)


def _config_record(config: GameConfig) -> dict[str, Any]:
    """GameConfig as JSON, a per-attribute kappa vector summarised by its distinct values."""
    record = config.to_dict()
    if config.kappa_vector is not None:
        values, counts = np.unique(np.asarray(config.kappa_vector), return_counts=True)
        record["kappa_vector"] = {"length": len(config.kappa_vector),
                                  "counts": {f"{v:g}": int(c) for v, c in zip(values, counts)}}
    return record


class Experiment:
    """One reproduction of a table of arXiv:2410.07414: population, trainings, evaluations, report.

    Example:
        >>> experiment = Experiment("table3_kappa", __doc__, parse_args(__doc__))   # doctest: +SKIP
        >>> run = experiment.train("kappa-1.5", kappa=1.5)                          # doctest: +SKIP
        >>> experiment.evaluate("kappa=1.5", experiment.run_defense(run), ["bayesian"], {})  # doctest: +SKIP
        >>> experiment.write()                                                      # doctest: +SKIP
    """

    def __init__(self, table: str, doc: str, args: argparse.Namespace) -> None:
        self.table = table
        title, _, body = doc.strip().split("\nUsage")[0].partition("\n")
        self.title = title.strip()
        self.description = body.strip()
        self.scale = scale_from_args(args)
        self.seed = int(args.seed)
        self.out = Path(args.out) if args.out is not None else RESULTS_DIR / table
        self.stem = f"{self.scale.name}_seed{self.seed}"
        self.runs_dir = self.out / "runs" / self.stem
        self.started = time.perf_counter()
        self.settings: dict[str, Any] = {}
        self.rows: list[Row] = []
        self.trainings: dict[str, dict] = {}
        self.evaluations: dict[str, dict] = {}
        self.notes: list[str] = []
        scale = self.scale
        self.log(f"scale {scale.name}: K={scale.individuals}, N={scale.members}, |Q|={scale.snvs}, "
                 f"reference {scale.reference}, seed {self.seed}; simulating the population")
        start = time.perf_counter()
        self.population = simulate_genome(scale.individuals, scale.reference, scale.snvs, seed=self.seed)
        self.population_seconds = time.perf_counter() - start
        self.prior = UniformSubsetPrior(scale.individuals, scale.members)
        self.context = DefenseContext(self.population, scale.members)

    def log(self, message: str) -> None:
        """Print a progress line tagged with the table name."""
        print(f"[{self.table}] {message}", flush=True)

    # -- defenses ---------------------------------------------------------------------------
    def game_config(self, **overrides: Any) -> GameConfig:
        """GameConfig with this scale's budgets and the experiment's seed, plus ``overrides``."""
        scale = self.scale
        base = GameConfig(steps=scale.steps, fresh_check_steps=scale.fresh_check_steps, eval_every=scale.eval_every,
                          checkpoint_every=scale.checkpoint_every, seed=self.seed)
        return replace(base, **overrides)

    def _completed(self, run_dir: Path, config: GameConfig) -> bool:
        """True when ``run_dir`` holds a complete run of ``config`` on this population."""
        try:
            verify_run(run_dir)
        except BNGPError:
            return False
        saved = json.loads((run_dir / CONFIG_FILE).read_text())
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
        return (
            saved.get("config") == json.loads(json.dumps(config.to_dict()))
            and saved.get("population", {}).get("fingerprint") == population_fingerprint(self.population.genotypes)
            and summary.get("steps") == config.steps
        )

    def train(self, label: str, **overrides: Any) -> Path:
        """Train (or reuse / resume) the defender ``label`` with :meth:`game_config` (``overrides``)."""
        config = self.game_config(**overrides)
        run_dir = self.runs_dir / label
        start = time.perf_counter()
        reused = self._completed(run_dir, config)
        if reused:
            self.log(f"{label}: reusing the finished run in {run_dir}")
            summary = TrainingSummary.load(run_dir / SUMMARY_FILE)
        else:
            resume = (staging_dir(run_dir) / CHECKPOINT_FILE).is_file()
            self.log(f"{label}: training {config.steps} steps{' (resuming its checkpoint)' if resume else ''} -> {run_dir}")
            summary = Game(self.population, self.prior, config).train(run_dir, resume=resume, force=True, progress=True)
        seconds = time.perf_counter() - start
        check = summary.fresh_attacker_check
        self.trainings[label] = {
            "run": str(run_dir),
            "config": _config_record(config),
            "reused": reused,
            "seconds": seconds,
            "against": config.against,
            "opponent": summary.against if config.against != "bayesian" else None,
            "final": summary.final,
            "selected": summary.selected,
            "collapse": summary.collapse.to_dict(),
            "fresh_attacker_check": check,
            "bgbp": None if summary.bgbp is None else summary.bgbp.to_dict(),
        }
        for warning in (summary.collapse.warning, (check or {}).get("warning")):
            if warning:
                self.notes.append(f"training `{label}`: {warning}")
        fresh = f", fresh attacker AUC {check['auc']:.4f}" if check else ""
        delivered = summary.delivered
        selected = f", state of step {delivered['step']} kept" if summary.selected else ""
        self.log(f"{label}: done in {seconds:.1f} s (in-game attacker AUC {delivered.get('heldout_auc', float('nan')):.4f}"
                 f", utility loss {delivered.get('heldout_utility_loss', float('nan')):.5f}{fresh}{selected})")
        return run_dir

    def run_defense(self, run_dir: Path) -> Defense:
        """The trained defender of ``run_dir`` as a defense (``run:RUN_DIR``)."""
        return load_run_defense(run_dir, self.context)

    def defense(self, spec: str) -> Defense:
        """A defense from a ``--defense`` SPEC (e.g. ``laplace:scale=0.01``, ``matched-laplace:run=DIR``)."""
        return parse_defense_spec(spec, self.context)

    # -- attacks ----------------------------------------------------------------------------
    def attack(self, name: str, defense: Defense) -> Attack:
        """A fresh instance of attack ``name`` against ``defense``; the Bayesian attacker trains
        for this scale's budget."""
        if name != "bayesian":
            return get_attack(name)
        return BayesianAttack(AttackerTrainingConfig(steps=self.scale.attacker_eval_steps))

    def applicable_attacks(self, defense: Defense) -> list[str]:
        """Every registered attack whose knowledge an evaluation against ``defense`` can provide."""
        knowledge = attack_knowledge(self.population, self.prior, defense, self.scale.members)
        return applicable_attacks(knowledge)

    def evaluate(
        self,
        setting: str,
        defense: Defense,
        attacks: Sequence[str],
        paper: Mapping[str, PaperAUC],
        *,
        kappa: np.ndarray | None = None,
    ) -> dict:
        """Evaluate ``attacks`` against ``defense``; add one :class:`report.Row` per attack.

        Every call uses the experiment's seed, so all settings of a table are scored on the
        same evaluation memberships.  Returns the evaluation payload (EVAL.json form, plus
        each attack's wall time and orientation).
        """
        self.log(f"{setting}: evaluating {', '.join(attacks)} on {self.scale.releases} releases")
        instances = {name: self.attack(name, defense) for name in attacks}
        start = time.perf_counter()
        result = evaluate_defense(self.population, self.prior, defense, instances, releases=self.scale.releases,
                                  seed=self.seed, n_members=self.scale.members, kappa=kappa, progress=True)
        payload = result.to_dict()
        payload["seconds"] = time.perf_counter() - start
        for name, entry in payload["attacks"].items():
            self.rows.append(Row(setting, name, entry["auc"], entry["auc_std"], paper.get(name), entry["raw_auc"],
                                 payload["utility_loss"], entry["seconds"]))
            self.log(f"{setting}: {name} AUC {entry['auc']:.4f} ± {entry['auc_std']:.4f} "
                     f"(paper {format_auc(paper.get(name))}) in {entry['seconds']:.1f} s")
        self.notes += [f"{setting}: {note}" for note in payload["notes"]]
        self.evaluations[setting] = payload
        return payload

    # -- report -----------------------------------------------------------------------------
    def write(self) -> dict[str, Path]:
        """Write the JSON, Markdown and PNG reports (:func:`report.write_report`); returns their paths."""
        return write_report(self)
