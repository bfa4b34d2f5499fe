"""Shared machinery of the runners that reproduce paper 003's result tables (App. L.9).

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

Orientation (reference/bngp.md): every AUC we report is that of the attack in the direction
it fixed from its own shadow data; the paper's tables show some attacks' raw direction (e.g.
adaptive LRT 0.1552), so the reports also give our AUC in the raw direction next to it.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bngp.attacks.base import Attack
from bngp.attacks.bayesian import BayesianAttack
from bngp.attacks.registry import applicable_attacks, get_attack
from bngp.defenses.artifact import population_fingerprint
from bngp.attacks.training import AttackerTrainingConfig
from bngp.data.genome import simulate_genome
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.attacks.base import attack_knowledge
from bngp.evaluate import evaluate_defense
from bngp.errors import BNGPError
from bngp.game import CHECKPOINT_FILE, CONFIG_FILE, SUMMARY_FILE, Game, GameConfig
from bngp.run_dir import staging_dir, verify_run
from bngp.io_utils import atomic_write, write_json, write_text
from bngp.defenses import Defense, DefenseContext, load_run_defense, parse_defense_spec

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

#: default output root: ``experiments/results/<table>/``.
RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: (mean, std) of an AUC as printed in the paper's App. L.9.
PaperAUC = tuple[float, float]
#: packages whose versions every result records.
_PACKAGES = ("bngp", "torch", "numpy", "scipy", "scikit-learn", "msprime", "stdpopsim", "tskit", "matplotlib")


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


#: ``paper``: the paper's genome setup (App. L) with GameConfig's and AttackerTrainingConfig's
#: default budgets; ``small``: K 200, N 100, |Q| 1000 (minutes on one core per training);
#: ``tiny``: K 40, N 20, |Q| 120, a few steps (smoke tests; the numbers mean nothing).
SCALES: dict[str, Scale] = {
    "tiny": Scale("tiny", 40, 20, 120, 40, steps=6, fresh_check_steps=4, attacker_eval_steps=8,
                  releases=4, eval_every=3, checkpoint_every=6),
    "small": Scale("small", 200, 100, 1000, 200, steps=1200, fresh_check_steps=600, attacker_eval_steps=1000,
                   releases=50, eval_every=50, checkpoint_every=250),
    "paper": Scale("paper", 800, 400, 5000, 800, steps=1500, fresh_check_steps=1000, attacker_eval_steps=1500,
                   releases=100, eval_every=50, checkpoint_every=250),
}


@dataclass(frozen=True)
class Row:
    """One line of a reproduced table: an attack's AUC against one setting.

    Attributes:
        setting: the defense / condition (e.g. "BNGP defender, kappa=1.5").
        attack: attack registry name.
        auc: mean per-release AUC, in the direction the attack fixed from its own data.
        auc_std: std of the per-release AUCs.
        paper: the paper's (mean, std) for this cell, or None when the paper has none.
        raw_auc: our AUC in the attack's raw (unflipped) direction, as the paper reports it.
        utility_loss: mean |x - f(D)| of the evaluation releases (all released outputs).
        seconds: wall time of the attack (fit + score).
    """

    setting: str
    attack: str
    auc: float
    auc_std: float
    paper: PaperAUC | None
    raw_auc: float
    utility_loss: float
    seconds: float


def typical_replacement_l2(population: Population, members: int) -> float:
    """Typical l2 change of the frequency vector when one member is replaced by another.

    Delta = sqrt(2 sum_j p_j (1 - p_j)) / N with p_j the carrier frequency in the population:
    E ||d_k - d_k'||^2 = 2 sum_j p_j (1 - p_j) for two random individuals.  A Gaussian
    mechanism N(0, s^2) then separates a typical pair with the Gaussian-DP parameter
    mu = Delta / s, a scale-free measure of its strength used to set Table 5's constant C.
    """
    frequencies = population.genotypes.mean(axis=0, dtype=np.float64)
    return float(math.sqrt(2.0 * np.sum(frequencies * (1.0 - frequencies))) / members)


def environment() -> dict[str, Any]:
    """Python, platform, torch threads, command line and versions of the relevant packages."""
    packages: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "argv": list(sys.argv),
        "packages": packages,
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


def _override(scale: Scale, args: argparse.Namespace) -> Scale:
    """``scale`` with the budgets given on the command line (--steps, --attacker-steps, --releases)."""
    changes = {"steps": args.steps, "attacker_eval_steps": args.attacker_steps,
               "fresh_check_steps": args.attacker_steps, "releases": args.releases}
    return replace(scale, **{name: value for name, value in changes.items() if value is not None})


def _config_record(config: GameConfig) -> dict[str, Any]:
    """GameConfig as JSON, a per-attribute kappa vector summarised by its distinct values."""
    record = config.to_dict()
    if config.kappa_vector is not None:
        values, counts = np.unique(np.asarray(config.kappa_vector), return_counts=True)
        record["kappa_vector"] = {"length": len(config.kappa_vector),
                                  "counts": {f"{v:g}": int(c) for v, c in zip(values, counts)}}
    return record


def _describe_defense(description: dict) -> str:
    """One phrase for a defense's description: name, DP guarantee, utility match."""
    text = description.get("name", "?")
    guarantee = description.get("guarantee")
    if guarantee:
        delta = f", delta {guarantee['delta']:g}" if guarantee.get("delta") else ""
        text += (f", {guarantee['mechanism']} eps = {guarantee['epsilon']:.4g}{delta} for {guarantee['norm']} sensitivity "
                 f"{guarantee['sensitivity']:g} ({guarantee['neighbouring']})")
    parameters = description.get("parameters", {})
    for key in ("scale", "sigma"):
        if key in parameters:
            text += f", {key} {parameters[key]:.4g}"
    matched = description.get("matched")
    if matched:
        text += f", matched to utility loss {matched['target_utility_loss']:.5f} of `{matched['run']}`"
    return text


def _format_auc(value: PaperAUC | tuple[float, float] | None) -> str:
    return "-" if value is None else f"{value[0]:.4f} ± {value[1]:.4f}"


class Experiment:
    """One reproduction of a paper table: population, trainings, evaluations, report.

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
        self.scale = _override(SCALES[args.scale], args)
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
            summary = json.loads((run_dir / SUMMARY_FILE).read_text())
        else:
            resume = (staging_dir(run_dir) / CHECKPOINT_FILE).is_file()
            self.log(f"{label}: training {config.steps} steps{' (resuming its checkpoint)' if resume else ''} -> {run_dir}")
            summary = Game(self.population, self.prior, config).train(run_dir, resume=resume, force=True, progress=True)
        seconds = time.perf_counter() - start
        check = summary.get("fresh_attacker_check")
        self.trainings[label] = {
            "run": str(run_dir),
            "config": _config_record(config),
            "reused": reused,
            "seconds": seconds,
            "against": config.against,
            "opponent": summary["against"] if config.against != "bayesian" else None,
            "final": summary["final"],
            "selected": summary.get("selected"),
            "collapse": summary["collapse"],
            "fresh_attacker_check": check,
            "bgbp": summary.get("bgbp"),
        }
        for warning in (summary["collapse"].get("warning"), (check or {}).get("warning")):
            if warning:
                self.notes.append(f"training `{label}`: {warning}")
        fresh = f", fresh attacker AUC {check['auc']:.4f}" if check else ""
        delivered = summary.get("selected") or summary["final"]
        selected = f", state of step {delivered['step']} kept" if summary.get("selected") else ""
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
        """Evaluate ``attacks`` against ``defense``; add one :class:`Row` per attack.

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
                     f"(paper {_format_auc(paper.get(name))}) in {entry['seconds']:.1f} s")
        self.notes += [f"{setting}: {note}" for note in payload["notes"]]
        self.evaluations[setting] = payload
        return payload

    # -- report -----------------------------------------------------------------------------
    def write(self) -> dict[str, Path]:
        """Write the JSON, Markdown and PNG reports; returns their paths."""
        paths = {kind: self.out / f"{self.stem}.{kind}" for kind in ("json", "md", "png")}
        wall = time.perf_counter() - self.started
        payload = {
            "table": self.table,
            "title": self.title,
            "scale": asdict(self.scale),
            "seed": self.seed,
            "wall_seconds": wall,
            "population": {
                "fingerprint": population_fingerprint(self.population.genotypes),
                "seconds": self.population_seconds,
                "prior": self.prior.describe(),
                "metadata": self.population.metadata,
            },
            "settings": self.settings,
            "rows": [asdict(row) for row in self.rows],
            "trainings": self.trainings,
            "evaluations": self.evaluations,
            "notes": self.notes,
            "environment": environment(),
            "outputs": {kind: str(path) for kind, path in paths.items()},
        }
        write_json(paths["json"], payload)
        write_text(paths["md"], self.markdown(wall))
        self.plot(paths["png"])
        self.log(f"wrote {paths['json']}, {paths['md']}, {paths['png']} ({wall:.1f} s in all)")
        return paths

    def markdown(self, wall: float) -> str:
        """The Markdown report: our numbers next to the paper's, knowledge statements, notes."""
        scale = self.scale
        lines = [
            f"# {self.title}",
            "",
            self.description,
            "",
            f"Scale **{scale.name}**: K = {scale.individuals}, N = {scale.members}, |Q| = {scale.snvs}, reference "
            f"panel {scale.reference}; {scale.steps} training steps, Bayesian attacker {scale.attacker_eval_steps} "
            f"steps, {scale.releases} evaluation releases; seed {self.seed}; wall time {wall:.1f} s.",
            "",
        ]
        shown = {key: value for key, value in self.settings.items() if not (isinstance(value, list) and len(value) > 8)}
        if shown:
            listed = "; ".join(f"{key} = {value}" for key, value in shown.items())
            lines += [f"Settings (all of them in the JSON): {listed}.", ""]
        lines += [
            "| setting | attack | AUC ± std (ours) | AUC ± std (paper) | ours, raw direction | utility loss "
            "| attack time (s) |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in self.rows:
            lines.append(f"| {row.setting} | {row.attack} | {_format_auc((row.auc, row.auc_std))} | {_format_auc(row.paper)} "
                         f"| {row.raw_auc:.4f} | {row.utility_loss:.5f} | {row.seconds:.2f} |")
        lines += [
            "",
            "AUCs are means over releases, each attack in the direction it fixed from its own shadow data (never "
            "from evaluation labels); \"raw direction\" is the unflipped statistic, the form in which the paper "
            "reports e.g. the adaptive LRT. Utility loss = mean |x - f(D)| over all released outputs.",
            "",
            "Defenses and strongest attack per setting (a defense is only as private as its strongest attack shows):",
        ]
        for setting, payload in self.evaluations.items():
            strongest = payload["strongest_attack"]
            gap = payload.get("attack_gap")
            versus = "" if gap is None else f"; best analytic `{gap['best_analytic']}` minus Bayesian AUC {gap['gap']:+.4f}"
            lines.append(f"- {setting} [{_describe_defense(payload['defense'])}]: strongest **{strongest['name']}** "
                         f"(AUC {strongest['auc']:.4f}){versus}")
        utilities = {setting: payload["utility"] for setting, payload in self.evaluations.items() if payload.get("utility")}
        if utilities:
            baseline = next(iter(utilities.values()))["data_independent_utility_loss"]
            lines += [
                "",
                f"Against the data-independent release f(theta) (AUC 0.5 against every attack, utility loss {baseline:.5f}):",
                "",
                "| setting | utility loss | relative error | signal retention | strongest AUC | verdict |",
                "|---|---|---|---|---|---|",
                f"| data-independent release f(theta) | {baseline:.5f} | 1 | 0 | 0.5 | baseline |",
            ]
            for setting, utility in utilities.items():
                lines.append(f"| {setting} | {utility['utility_loss']:.5f} | {utility['relative_error']:.3f} | "
                             f"{utility['signal_retention']:.3f} | {self.evaluations[setting]['strongest_attack']['auc']:.4f} | "
                             f"{utility['verdict']} |")
        if self.trainings:
            lines += ["", "Trained defenders (fresh attacker = a new network trained against the frozen defender):"]
            for label, record in self.trainings.items():
                check = record["fresh_attacker_check"]
                fresh = f"fresh attacker AUC {check['auc']:.4f}" if check else "no fresh-attacker check"
                bgbp = record["bgbp"]
                if bgbp is not None and check is not None:
                    fresh += (f"; BGBP constraint DPH^{bgbp['epsilon']:g} (Prop. 10: eps_hat = {bgbp['implied_epsilon']:.3f}-DP "
                              f"if it holds), fresh attacker outside its bounds on "
                              f"{check.get('dp_bound_violation_rate', float('nan')):.1%} of outputs")
                delivered = record.get("selected") or record["final"]
                kept = f"state of step {delivered['step']} kept (best against a refitted attacker); " if record.get("selected") else ""
                lines.append(f"- `{label}` ({record['against']}): {fresh}; {kept}in-game held-out utility loss of the learned "
                             f"noise {delivered.get('heldout_utility_loss', float('nan')):.5f}; "
                             f"{record['seconds']:.1f} s{' (reused)' if record['reused'] else ''}.")
        knowledge: dict[str, str] = {}
        for payload in self.evaluations.values():
            for name, entry in payload["attacks"].items():
                knowledge.setdefault(name, entry["knowledge"])
        lines += ["", "Attack knowledge:"] + [f"- `{name}`: {text}" for name, text in knowledge.items()]
        if self.notes:
            lines += ["", "Notes and warnings:"] + [f"- {note}" for note in self.notes]
        versions = ", ".join(f"{name} {value}" for name, value in environment()["packages"].items() if value)
        lines += ["", f"Python {platform.python_version()}; {versions}; torch threads {torch.get_num_threads()}."]
        return "\n".join(lines) + "\n"

    def plot(self, path: Path) -> Path:
        """Bar chart of our AUC +- std next to the paper's, one pair of bars per row."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        labels = [f"{row.setting}\n{row.attack}" for row in self.rows]
        positions = np.arange(len(self.rows))
        figure, axis = plt.subplots(figsize=(8.0, 1.2 + 0.55 * len(self.rows)), dpi=110)
        axis.barh(positions - 0.2, [row.auc for row in self.rows], height=0.38,
                  xerr=[row.auc_std for row in self.rows], label=f"ours ({self.scale.name})", color="tab:blue")
        paper = [(i, row.paper) for i, row in enumerate(self.rows) if row.paper is not None]
        if paper:
            axis.barh([i + 0.2 for i, _ in paper], [value[0] for _, value in paper], height=0.38,
                      xerr=[value[1] for _, value in paper], label="paper", color="tab:orange")
        axis.axvline(0.5, color="grey", linestyle="--", linewidth=0.8, label="data-independent release (0.5)")
        axis.set_yticks(positions, labels, fontsize=7)
        axis.invert_yaxis()
        axis.set_xlim(0.0, 1.0)
        axis.set_xlabel("AUC (mean ± std over releases)")
        axis.set_title(f"{self.table} ({self.scale.name}, seed {self.seed})", fontsize=9, loc="left")
        axis.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8, frameon=False)
        figure.tight_layout()
        with atomic_write(path) as handle:
            figure.savefig(handle, format="png")
        plt.close(figure)
        return path
