"""One reproduction of an experiment of arXiv:2410.07414: population, trained defenders, evaluations.

An :class:`Experiment` is built from an :class:`ExperimentSpec` (what the paper ran: data set,
sizes per scale, the paper's numbers, where we knowingly differ) at one scale and seed.  It

1. makes the population once (:func:`bngp.reproduce.datasets.make_population`) with the "n of
   K" membership prior (section 2.2);
2. trains BNGP defenders with :class:`bngp.game.Game` into ``OUT/NAME/runs/SCALE_seedS/LABEL/``
   (a completed run of the same configuration on the same population is reused and an
   interrupted one resumed from its checkpoint, so a paper-scale reproduction can be split
   across several invocations; a finished run keeps its defender, config, summary and TensorBoard logs
   but not its checkpoint (:func:`bngp.run_dir.drop_from_run`), small enough to keep with the
   results);
3. evaluates defenses with :func:`bngp.evaluate.evaluate_defense` on the same evaluation
   memberships for every setting (paired comparisons), timing each attack, and adds one
   :class:`Row` per attack.  Each finished evaluation is stored in
   ``OUT/NAME/runs/SCALE_seedS/evaluations/`` under the hash of what it computes (defense and
   the manifests of its run directories, attacks, budget, seed, population, device, version),
   so a rerun after an interruption redoes only what was not finished.

:mod:`bngp.reproduce.report` writes its report directory.  Orientation (:mod:`bngp.evaluate`):
every AUC is that of the attack in the direction it fixed from its own shadow data; the paper
prints some attacks in their raw direction (e.g. adaptive LRT 0.1552), so each row also carries
the raw-direction AUC.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bngp.attacks.base import Attack, attack_knowledge
from bngp.attacks.registry import applicable_attacks, attack_class, get_attack
from bngp.attacks.training import AttackerTrainingConfig
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses import Defense, DefenseContext, load_run_defense, parse_defense_spec
from bngp.defenses.artifact import population_fingerprint
from bngp.errors import InputError
from bngp.workers import resolve_workers
from bngp.evaluate import evaluate_defense
from bngp.evaluation_record import EvaluationResult, check_evaluation_format
from bngp.game import (
    AttackerSettings, DefenderSettings, FreshCheckSettings, Game, GameConfig, ObjectiveSettings, RunState, SelectionSettings,
    train_once,
)
from bngp.reproduce.datasets import DATASETS, make_population
from bngp.reproduce.scales import SCALES, Budget, Sizes
from bngp.io_utils import atomic_write, write_json
from bngp.run_dir import MANIFEST_FILE

__all__ = ["PaperAUC", "ExperimentSpec", "Row", "Experiment", "typical_replacement_l2", "format_auc"]

#: (mean, std) of an AUC as printed in arXiv:2410.07414, App. L.9.
PaperAUC = tuple[float, float]
#: the folder of ``runs/SCALE_seedS/`` holding finished evaluations (reused by a rerun).
EVALUATIONS = "evaluations"


def _package_version() -> str:
    try:
        return version("bngp")
    except PackageNotFoundError:
        return "unknown"


def format_auc(value: PaperAUC | tuple[float, float] | None) -> str:
    """``mean ± std`` of an AUC, ``-`` for none."""
    return "-" if value is None else f"{value[0]:.4f} ± {value[1]:.4f}"


@dataclass(frozen=True, eq=False)
class ExperimentSpec:
    """What one experiment of the paper is, and how we run it.

    Attributes:
        name: the ``bngp reproduce NAME`` (e.g. ``table3``, ``fig2d-images``).
        title: one line, with the paper's figure / table.
        description: what is trained and attacked (Markdown, shown at the top of the report).
        dataset: a key of :data:`bngp.reproduce.datasets.DATASETS`.
        sizes: the population at each scale (``quick``, ``small``, ``paper``).
        differences: where and why this reproduction knowingly differs from the paper.
        run: trains and evaluates into the :class:`Experiment` it is given.
    """

    name: str
    title: str
    description: str
    dataset: str
    sizes: Mapping[str, Sizes]
    differences: tuple[str, ...]
    run: Callable[["Experiment"], None]

    @property
    def label(self) -> str:
        """The paper's figure or table, e.g. ``Table 3`` or ``Fig. 2d`` (the title up to its first parenthesis)."""
        return self.title.split(" (")[0]

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise InputError(f"unknown data set {self.dataset!r} in experiment {self.name!r}.")
        if set(self.sizes) != set(SCALES):
            raise InputError(f"experiment {self.name!r} must give sizes for every scale ({', '.join(SCALES)}).")


@dataclass(frozen=True)
class Row:
    """One line of a reproduced table: an attack's AUC against one setting.

    Attributes:
        setting: the defense / condition (e.g. "BNGP defender, kappa=1.5").
        attack: attack registry name.
        auc: mean per-release AUC, in the direction the attack fixed from its own shadow data.
        auc_std: std of the per-release AUCs (ddof 1).
        paper: the paper's (mean, std) for this cell, or None when the paper has none.
        raw_auc: our AUC in the attack's raw (unflipped) direction, the form the paper prints.
        orientation: +1 when the attack kept its raw direction, -1 when its shadow data flipped it.
        utility_loss: mean |x - f(D)| of the evaluation releases (all released outputs).
        seconds: wall time of the attack (fit + score).
    """

    setting: str
    attack: str
    auc: float
    auc_std: float
    paper: PaperAUC | None
    raw_auc: float
    orientation: int
    utility_loss: float
    seconds: float

    @property
    def paper_comparable(self) -> float:
        """Our AUC in the direction the paper prints: the raw one when the paper's number is below
        0.5 (the paper shows the adaptive LRT and score attacks unflipped), else the oriented one."""
        return self.raw_auc if self.paper is not None and self.paper[0] < 0.5 else self.auc


def typical_replacement_l2(population: Population, members: int) -> float:
    """Typical l2 change of the frequency vector when one member is replaced by another.

    Delta = sqrt(2 sum_j p_j (1 - p_j)) / N with p_j the carrier frequency in the population:
    E ||d_k - d_k'||^2 = 2 sum_j p_j (1 - p_j) for two random individuals.  A Gaussian
    mechanism N(0, s^2) then separates a typical pair with the Gaussian-DP parameter
    mu = Delta / s, a scale-free measure of its strength (Table 5's constant C).
    """
    frequencies = population.genotypes.mean(axis=0, dtype=np.float64)
    return float(math.sqrt(2.0 * np.sum(frequencies * (1.0 - frequencies))) / members)


def _config_record(config: GameConfig) -> dict[str, Any]:
    """GameConfig in its flat form (:meth:`GameConfig.flat`), a per-attribute kappa vector summarised by its
    distinct values."""
    record = config.flat()
    kappa_vector = config.objective.kappa_vector
    if kappa_vector is not None:
        values, counts = np.unique(np.asarray(kappa_vector), return_counts=True)
        record["kappa_vector"] = {"length": len(kappa_vector),
                                  "counts": {f"{v:g}": int(c) for v, c in zip(values, counts)}}
    return record


class Experiment:
    """The state of one reproduction: population, trainings, evaluations, rows and notes.

    Example:
        >>> experiment = Experiment(EXPERIMENTS["table3"], "quick", 0, Path("out"), BUDGETS["quick"])  # doctest: +SKIP
        >>> run = experiment.train("kappa-1.5", kappa=1.5)                                             # doctest: +SKIP
        >>> experiment.evaluate("kappa=1.5", experiment.run_defense(run), ["bayesian"], {})           # doctest: +SKIP
    """

    def __init__(self, spec: ExperimentSpec, scale: str, seed: int, out: Path, budget: Budget, *,
                 device: torch.device | str = "cpu", progress: bool = True, workers: int | str = 1) -> None:
        if scale not in SCALES:
            raise InputError(f"`--scale` must be one of {', '.join(SCALES)}, got {scale!r}.")
        resolve_workers(workers, 0)
        #: processes of each evaluation (1, 2 or "auto": :func:`bngp.workers.resolve_workers` of its population).
        self.workers = workers
        self.spec = spec
        self.scale = scale
        self.seed = int(seed)
        self.budget = budget
        self.device = device
        self.progress = progress
        self.sizes = spec.sizes[scale]
        self.stem = f"{scale}_seed{self.seed}"
        self.result_dir = Path(out) / spec.name / self.stem
        self.runs_dir = Path(out) / spec.name / "runs" / self.stem
        self.started = time.perf_counter()
        self.settings: dict[str, Any] = {}
        self.rows: list[Row] = []
        self.trainings: dict[str, dict] = {}
        self.evaluations: dict[str, dict] = {}
        self.results: dict[str, EvaluationResult] = {}
        self.notes: list[str] = []
        # id(defense) -> (the defense, the SPEC it was built from); holding the defense keeps its id
        # from being reused by a later object (a defense built in code then looked up a stale SPEC)
        self._specs: dict[int, tuple[Defense, str]] = {}
        self.log(f"scale {scale}: {self.sizes.describe()} ({spec.dataset}), seed {self.seed}; making the population")
        start = time.perf_counter()
        self.population = make_population(spec.dataset, self.sizes, self.seed)
        self.population_seconds = time.perf_counter() - start
        self.prior = UniformSubsetPrior(self.sizes.individuals, self.sizes.members)
        self.context = DefenseContext(self.population, self.sizes.members)

    def log(self, message: str) -> None:
        """Print a progress line tagged with the experiment's name."""
        if self.progress:
            print(f"[{self.spec.name}] {message}", flush=True)

    # -- defenses ---------------------------------------------------------------------------
    def game_config(self, fixed_gaussian_sigmas: tuple[float, ...] = (), **objective: Any) -> GameConfig:
        """GameConfig with this scale's budgets and the experiment's seed, the fixed Gaussian copies composed
        before the defender (App. L.6) and the objective's settings ``objective``
        (:class:`bngp.game.ObjectiveSettings`: ``kappa``, ``kappa_vector``, ``against``, ``dp_epsilon``)."""
        budget = self.budget
        # every step of the game and of the fresh-attacker check, batches of 64 and, in a composed game,
        # the in-game attacker on the whole release, as in the runs these reproductions have stored
        return GameConfig(steps=budget.steps, batch_size=64, eval_every=budget.eval_every,
                          checkpoint_every=budget.checkpoint_every, seed=self.seed,
                          objective=ObjectiveSettings(**objective),
                          defender=DefenderSettings(fixed_gaussian_sigmas=fixed_gaussian_sigmas),
                          attacker=AttackerSettings(pool_copies=False), selection=SelectionSettings(patience=None),
                          fresh_check=FreshCheckSettings(steps=budget.fresh_check_steps, patience=None))

    @property
    def reused_training_seconds(self) -> float:
        """The own time of the trainings this run reused instead of running (0 when none was reused)."""
        return sum(record["training_seconds"] for record in self.trainings.values() if record["reused"])

    def train(self, label: str, **overrides: Any) -> Path:
        """Train (or reuse / resume) the defender ``label`` with :meth:`game_config` (``overrides``)."""
        config = self.game_config(**overrides)
        run_dir = self.runs_dir / label
        start = time.perf_counter()

        def announce(state: RunState) -> None:
            if state == "finished":
                self.log(f"{label}: reusing the finished run in {run_dir}")
            else:
                resuming = " (resuming its checkpoint)" if state == "interrupted" else ""
                self.log(f"{label}: training {config.steps} steps{resuming} -> {run_dir}")

        game = Game(self.population, self.prior, config, device=self.device)
        summary, state = train_once(game, run_dir, progress=self.progress, announce=announce)
        reused = state == "finished"
        seconds = time.perf_counter() - start
        check = summary.fresh_attacker_check
        self.trainings[label] = {
            "run": str(run_dir),
            "config": _config_record(config),
            "reused": reused,
            "seconds": seconds,
            # the training's own time (the sum of its phases), also when this run reused it
            "training_seconds": float(sum(phase["seconds"] for phase in (summary.timings or {}).values())),
            "against": config.objective.against,
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
        self.log(f"{label}: done in {seconds:.1f} s (in-game attacker AUC {delivered.get('heldout_auc', float('nan')):.4f}"
                 f", utility loss {delivered.get('heldout_utility_loss', float('nan')):.5f}{fresh})")
        return run_dir

    def run_defense(self, run_dir: Path) -> Defense:
        """The trained defender of ``run_dir`` as a defense (``run:RUN_DIR``)."""
        defense = load_run_defense(run_dir, self.context)
        self._specs[id(defense)] = (defense, f"run:{run_dir}")
        return defense

    def defense(self, spec: str) -> Defense:
        """A defense from a ``--defense`` SPEC (e.g. ``laplace:epsilon=600``, ``matched-laplace:run=DIR``)."""
        defense = parse_defense_spec(spec, self.context)
        self._specs[id(defense)] = (defense, spec)
        return defense

    def spec_of(self, defense: Defense) -> str | None:
        """The ``--defense`` SPEC ``defense`` was made from by :meth:`defense` or :meth:`run_defense`,
        None for a defense built in code."""
        entry = self._specs.get(id(defense))
        return None if entry is None else entry[1]

    # -- stored evaluations -----------------------------------------------------------------
    def _evaluation_key(self, setting: str, defense: Defense, attacks: Sequence[str], kappa: np.ndarray | None) -> str:
        """SHA-256 (first 20 hex digits) of what an evaluation computes: setting, defense (with the
        manifest of every run directory its SPEC names, so a retrained defender is evaluated anew),
        attacks, budget, seed, population, kappa, device and the package version."""
        spec = self.spec_of(defense) or ""
        runs = sorted(set(re.findall(r"run[:=]([^,]+)", spec)))
        record = {
            "setting": setting,
            "defense": defense.describe(),
            "runs": {run: hashlib.sha256((Path(run) / MANIFEST_FILE).read_bytes()).hexdigest() for run in runs},
            "attacks": list(attacks),
            "releases": self.budget.releases,
            "attacker_steps": self.budget.attacker_eval_steps,
            "seed": self.seed,
            "members": self.sizes.members,
            "population": population_fingerprint(self.population.genotypes),
            "kappa": None if kappa is None else hashlib.sha256(np.ascontiguousarray(kappa, dtype=np.float64)).hexdigest(),
            "device": str(self.device),
            "bngp": _package_version(),
        }
        return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:20]

    def _stored_evaluation(self, key: str) -> tuple[EvaluationResult, dict] | None:
        """The evaluation stored under ``key`` by an earlier run of this experiment, or None."""
        record, arrays = self.runs_dir / EVALUATIONS / f"{key}.json", self.runs_dir / EVALUATIONS / f"{key}.npz"
        if not (record.is_file() and arrays.is_file()):
            return None
        payload = check_evaluation_format(json.loads(record.read_text()), record)
        with np.load(arrays, allow_pickle=False) as data:
            labels = data["labels"]
            scores = {name: data[f"scores_{index}"] for index, name in enumerate(payload["attacks"])}
        result = EvaluationResult.from_dict(payload, labels, scores)
        payload["reused"] = True
        return result, payload

    def _store_evaluation(self, key: str, result: EvaluationResult, payload: dict) -> None:
        """Store an evaluation (scores first, the JSON record last: a record means a complete pair)."""
        folder = self.runs_dir / EVALUATIONS
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(folder / f"{key}.npz") as handle:
            np.savez(handle, labels=result.labels,
                     **{f"scores_{index}": result.scores[name] for index, name in enumerate(payload["attacks"])})
        write_json(folder / f"{key}.json", payload)

    # -- attacks ----------------------------------------------------------------------------
    def attack(self, name: str) -> Attack:
        """A fresh instance of attack ``name``; an attack that trains a network by config (the Bayesian
        attacker, ``Attack.trained_by_config``) trains for all the steps of this budget (no early stopping:
        the paper's fixed budget, as the stored evaluations were made)."""
        if not attack_class(name).trained_by_config:
            return get_attack(name)
        return get_attack(name, config=AttackerTrainingConfig(steps=self.budget.attacker_eval_steps, patience=None))

    def applicable_attacks(self, defense: Defense) -> list[str]:
        """Every registered attack whose knowledge an evaluation against ``defense`` can provide."""
        knowledge = attack_knowledge(self.population, self.prior, defense, self.sizes.members)
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
        """Evaluate ``attacks`` against ``defense`` and add one :class:`Row` per attack.

        Every call uses the experiment's seed, so all settings are scored on the same evaluation
        memberships.  Returns the evaluation payload (the EVAL.json form plus its wall time and,
        for a defense made by :meth:`defense` or :meth:`run_defense`, its ``--defense`` SPEC).
        """
        if setting in self.evaluations:
            raise InputError(f"setting {setting!r} is evaluated twice in experiment {self.spec.name!r}.")
        key = self._evaluation_key(setting, defense, attacks, kappa)
        stored = self._stored_evaluation(key)
        if stored is not None:
            self.log(f"{setting}: reusing its finished evaluation ({key})")
            result, payload = stored
        else:
            self.log(f"{setting}: evaluating {', '.join(attacks)} on {self.budget.releases} releases")
            # `linear` first: the Bayesian attacker then starts from its converged ridge fit (bngp.evaluate)
            instances = {name: self.attack(name) for name in sorted(attacks, key=lambda name: name != "linear")}
            start = time.perf_counter()
            width = self.population.n_attributes * defense.composition
            result = evaluate_defense(self.population, self.prior, defense, instances, releases=self.budget.releases,
                                      seed=self.seed, n_members=self.sizes.members, kappa=kappa, progress=self.progress,
                                      device=self.device,
                                      workers=resolve_workers(self.workers, self.population.n_individuals * width))
            payload = result.to_dict()
            payload["seconds"] = time.perf_counter() - start
            payload["defense_spec"] = self.spec_of(defense)  # None for a defense built in code
            self._store_evaluation(key, result, payload)
            payload["reused"] = False
        for name in attacks:
            entry = payload["attacks"][name]
            row = Row(setting, name, entry["auc"], entry["auc_std"], paper.get(name), entry["raw_auc"],
                      int(entry["orientation"]), payload["utility_loss"], entry["seconds"])
            self.rows.append(row)
            self.log(f"{setting}: {name} AUC {entry['auc']:.4f} ± {entry['auc_std']:.4f} "
                     f"(paper {format_auc(paper.get(name))}) in {entry['seconds']:.1f} s")
        self.notes += [f"{setting}: {note}" for note in payload["notes"]]
        self.evaluations[setting] = payload
        self.results[setting] = result
        return payload
