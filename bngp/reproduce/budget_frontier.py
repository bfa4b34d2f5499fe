"""The privacy-utility frontier at a utility budget (beyond arXiv:2410.07414): ``bngp reproduce budget-frontier``.

For each population and each budget U = F x L0 (L0 the loss of the data-independent release
f(theta); F in 7/8, 3/4, 1/2, 1/4, 1/8), every reference mechanism of :mod:`bngp.defenses.budget`
calibrated to U (Laplace, Gaussian, uniform shrinkage towards f(theta) plus Laplace noise over a grid of
shrinkages, suppression, the linear-decoder optimum, time-sharing) is attacked by the converged linear
attack of :func:`bngp.references.linear_attack_score` (AUC, TPR at 1% and 0.1% FPR; those that cannot be the best
keep the ranking's screening reading, :func:`bngp.references.rank_references`), a defender is
trained for U starting from the best of them (``bngp train --utility-budget``), and the defender and the
best reference are also attacked by every attack of ``bngp evaluate --attacks all``; every mechanism is
audited end to end (a many-run canary audit, :mod:`bngp.mechanism_audit`, whose eps lower bound holds with
95% confidence).

The lower envelope is, at each budget, the least AUC of the references other than time-sharing.
Time-sharing (release f(theta) with probability U / L0, else f(D)) is drawn for reference: its mean AUC
is linear in the mixing probability and beats the noise mechanisms, while every release it makes is
useless or fully revealing, which its TPR at low FPR shows.  Where every mechanism at a budget reads
above 0.99, the report says that no release at that budget protects membership on the population and
names the smallest budget at which one does (time-sharing left out: each of its releases is f(theta) or f(D)).

Three populations: a simulated genome with as many individuals as released attributes (K >= |Q|, the
frontier has an interior), UCI Adult, and the genome of the scale's other experiments (K < |Q| at the
small and paper scales: f(D) determines b, and a release much closer to f(D) than f(theta) is
reconstructed).  Each (population, budget) cell is stored in ``OUT/budget-frontier/cells/SCALE_seedS/``
as it completes and reused on a rerun; defenders train in ``OUT/budget-frontier/runs/SCALE_seedS/``.
Writes ``OUT/budget-frontier/SCALE_seedS/`` (``report.md``, ``results.json``, ``frontier.png``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path


from bngp.colours import family, method_colour, role_colour
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.registry import DefenseContext
from bngp.defenses.trained import load_run_defense
from bngp.evaluate import evaluate_defense
from bngp.decision import VERDICTS, AttackReading, DecisionRow, verdict
from bngp.game import FreshCheckSettings, Game, GameConfig, ObjectiveSettings, train_once
from bngp.game.start import start_config
from bngp.references import LinearAttackScore, linear_attack_score, rank_references
from bngp.io_utils import write_json, write_text
from bngp.mechanism_audit import audit_mechanism
from bngp.report import save_png
from bngp.reproduce.catalog import ADULT, GENOME
from bngp.reproduce.datasets import make_population
from bngp.reproduce.report import REFERENCE_MATMUL, ReproductionResult, environment, fresh_staging, frontier_plot_lines
from bngp.reproduce.scales import Budget, Sizes
from bngp.rng import spawn_seeds
from bngp.run_dir import commit_run
from bngp.timing import matmul_flops, peak_rss_bytes

__all__ = ["BUDGET_FRONTIER", "FRACTIONS", "FrontierPopulation", "run_budget_frontier", "frontier_cell", "verdicts",
           "time_sharing_line"]

#: the budgets, as fractions of the data-independent release's loss.
FRACTIONS = (0.875, 0.75, 0.5, 0.25, 0.125)
#: the uniform shrinkages tried at each budget.
SHRINK_GRID = (0.1, 0.2, 0.4, 0.6)
#: the end-to-end audit of every mechanism of a cell: many-run, this many canaries (at most N and K - N) and
#: releases, scored by this attack; its eps lower bound holds with 95% confidence.
AUDIT_CANARIES, AUDIT_RUNS, AUDIT_ATTACK = 100, 200, "score"
#: the AUC above which a release is said not to protect membership.
REVEALING_AUC = 0.99
TITLE = "Privacy-utility frontier at a utility budget (beyond arXiv:2410.07414): trained defenders and reference mechanisms"


@dataclass(frozen=True)
class FrontierPopulation:
    """A population of the frontier: its label, the data set it is drawn from, and its sizes."""

    label: str
    dataset: str
    sizes: Sizes

    @property
    def regime(self) -> str:
        attributes = self.sizes.attributes
        return "K >= |Q|" if attributes is None or self.sizes.individuals >= attributes else "K < |Q|"


#: scale -> (populations, budget fractions).  ``quick`` is a pipeline check.
BUDGET_FRONTIER: dict[str, tuple[tuple[FrontierPopulation, ...], tuple[float, ...]]] = {
    "quick": ((FrontierPopulation("genome K >= |Q|", "genome", Sizes(60, 30, 40, 40)),
               FrontierPopulation("adult", "adult", ADULT["quick"])), (0.5,)),
    "small": ((FrontierPopulation("genome K >= |Q|", "genome", Sizes(400, 200, 400, 400)),
               FrontierPopulation("adult", "adult", ADULT["paper"]),
               FrontierPopulation("genome K < |Q|", "genome", GENOME["small"])), FRACTIONS),
    "paper": ((FrontierPopulation("genome K >= |Q|", "genome", Sizes(400, 200, 400, 400)),
               FrontierPopulation("adult", "adult", ADULT["paper"]),
               FrontierPopulation("genome K < |Q|", "genome", GENOME["paper"])), FRACTIONS),
}


def _slug(text: str) -> str:
    return "".join(character if character.isalnum() else "-" for character in text).strip("-").replace("--", "-")


def _evaluation_record(population, prior, defense, members: int, releases: int, seed: int) -> dict:
    """The strongest of ``bngp evaluate --attacks all``: its name, AUC and TPR at 1% and 0.1% FPR."""
    result = evaluate_defense(population, prior, defense, "all", releases=releases, seed=seed, n_members=members,
                              progress=False)
    strongest = result.strongest_attack
    entry = result.attacks[strongest]
    return {"strongest_attack": strongest, "auc": entry.auc, "tpr_at_1pct_fpr": entry.tpr_at_fpr["0.01"],
            "tpr_at_0.1pct_fpr": entry.tpr_at_fpr["0.001"]}


def _audited_epsilon(population, defense, members: int, seed: int) -> float:
    """The eps lower bound of a many-run canary audit of ``defense`` (:data:`AUDIT_CANARIES`, :data:`AUDIT_RUNS`,
    :data:`AUDIT_ATTACK`; :func:`bngp.mechanism_audit.audit_mechanism`, confidence 0.95)."""
    canaries = min(AUDIT_CANARIES, members, population.n_individuals - members)
    result = audit_mechanism(population, defense, AUDIT_ATTACK, mode="many-run", canaries=canaries, members=members,
                             runs=AUDIT_RUNS, seed=seed, progress=False, device="cpu")
    return float(result.epsilon_lb)


def frontier_cell(population, members: int, fraction: float, seed: int, budget: Budget, run_dir: Path, *,
                  audit: bool = True) -> dict:
    """One (population, budget) cell of the module docstring, as a JSON-able record with the wall time of each
    phase (``phase_seconds``); without ``audit`` the end-to-end audits are left out (their fields absent)."""
    started = time.perf_counter()
    phases: dict[str, float] = {}

    def lap(name: str) -> None:
        phases[name] = time.perf_counter() - started - sum(phases.values())

    prior = UniformSubsetPrior(population.n_individuals, members)
    ranking_seed, trained_seed, evaluation_seed, audit_seed = spawn_seeds(seed, 4)
    ranking = rank_references(population, members, f"{fraction:g}x", ranking_seed, shrink_grid=SHRINK_GRID)
    best = ranking.best_score
    lap("references")
    config = start_config(ranking, GameConfig(
        steps=budget.steps, eval_every=budget.eval_every, checkpoint_every=budget.checkpoint_every, seed=seed,
        objective=ObjectiveSettings(kind="utility-budget", budget=ranking.budget.value),
        fresh_check=FreshCheckSettings(steps=0)))
    game = Game(population, prior, config, start=ranking.best,
                start_record={"reference": best.label, "ranking": ranking.to_dict()})
    summary, _ = train_once(game, run_dir)
    lap("game")
    context = DefenseContext(population, members)
    trained = load_run_defense(run_dir, context)
    # the delivered G as the mechanism it releases when its network output is zero: the best reference itself
    # when the game kept its start, whose converged attack and evaluation the ranking has already made
    closed = trained.closed_form(getattr(ranking.best, "space", None))
    same = closed is not None and closed.same_release(ranking.best)
    if same:
        score = LinearAttackScore(best.auc, best.tpr_at_1pct, best.tpr_at_01pct, best.releases, map=best.map,
                                  auc_se=best.auc_se)
    else:
        score = linear_attack_score(trained, population, members, trained_seed)
    lap("linear attack of the defender")
    best_evaluation = _evaluation_record(population, prior, ranking.best, members, budget.releases, evaluation_seed)
    evaluation = {"trained": {**best_evaluation, "same_release_as": "best_reference"} if same else
                  _evaluation_record(population, prior, trained, members, budget.releases, evaluation_seed),
                  "best_reference": best_evaluation}
    lap("evaluations (every attack)")
    references = ranking.to_dict()["references"]
    trained_record = {**score.to_dict(), "loss": summary.budget.kept_state_value, "met": summary.budget.met,
                      "start": {key: summary.start[key] for key in ("reference", "kept", "reason", "final_state_moved",
                                                                     "kept_state_moved", "trained_step", "final_step")
                                if key in summary.start},
                      "steps": summary.steps, "timings": summary.timings}
    if audit:
        for entry in references:
            entry["audited_epsilon_lb"] = _audited_epsilon(population, ranking.defenses[entry["label"]], members,
                                                           audit_seed)
        trained_record["audited_epsilon_lb"] = _audited_epsilon(population, trained, members, audit_seed)
        lap("audits")
    return {
        "fraction": fraction, "budget": ranking.budget.to_dict(), "references": references,
        "best_reference": best.label, "trained": trained_record, "evaluation": evaluation,
        "seconds": time.perf_counter() - started, "phase_seconds": phases,
        "reference_build_seconds": ranking.build_seconds,
    }


def _envelope(cell: dict) -> dict:
    references = [entry for entry in cell["references"] if entry["label"] != "time-sharing"]
    return min(references, key=lambda entry: entry["auc"])


def verdicts(cells: list[dict]) -> list[str]:
    """Per budget of one population: where the trained defender sits against the envelope, and whether any
    release protects (module docstring); then the smallest budget at which one does."""
    lines = []
    protecting = []
    for cell in sorted(cells, key=lambda item: item["fraction"]):
        # time-sharing is left out: each of its releases is f(theta) or f(D) itself, whatever its mean AUC
        everything = [entry["auc"] for entry in cell["references"] if entry["label"] != "time-sharing"]
        everything.append(cell["trained"]["auc"])
        envelope = _envelope(cell)
        margin = cell["trained"]["auc"] - envelope["auc"]
        place = "below" if margin < -0.01 else "on" if margin <= 0.01 else "above"
        text = (f"- budget {cell['fraction']:g} x L0 = {cell['budget']['budget']:.5g}: the defender reads AUC "
                f"{cell['trained']['auc']:.4f}, {place} the envelope ({envelope['label']} {envelope['auc']:.4f}; margin "
                f"{margin:+.4f}); decision: {VERDICTS[cell_decision(cell)]}")
        if min(everything) > REVEALING_AUC:
            text += f"; every mechanism reads above {REVEALING_AUC}: no release at this budget protects membership here"
        else:
            protecting.append(cell)
        lines.append(text + ".")
    if protecting:
        smallest = min(protecting, key=lambda item: item["budget"]["budget"])
        lines.append(f"- The smallest budget tried at which some release reads AUC <= {REVEALING_AUC}: "
                     f"{smallest['fraction']:g} x L0 = {smallest['budget']['budget']:.5g}.")
    else:
        lines.append(f"- No budget tried has a release reading AUC <= {REVEALING_AUC}.")
    return lines


def cell_decision(cell: dict) -> str:
    """The verdict of :func:`bngp.decision.verdict` for the trained defender of a cell: its loss against L0, the
    strongest of its evaluation and the converged linear attack, and the linear-attack AUCs of matched Laplace,
    matched Gaussian and the envelope at the same budget."""
    trained, evaluation = cell["trained"], cell["evaluation"]["trained"]
    by_label = {entry["label"]: entry for entry in cell["references"]}
    strongest = max((AttackReading(evaluation["strongest_attack"], evaluation["auc"], evaluation["tpr_at_1pct_fpr"],
                                   evaluation["tpr_at_0.1pct_fpr"]),
                     AttackReading("linear (converged)", trained["auc"], trained["tpr_at_1pct_fpr"],
                                   trained["tpr_at_0.1pct_fpr"])), key=lambda reading: reading.auc)
    rows = [DecisionRow(label, trained["loss"] if label == "trained" else entry["loss"], entry["auc"],
                        entry["tpr_at_1pct_fpr"], entry["tpr_at_0.1pct_fpr"])
            for label, entry in (("trained", trained), ("laplace", by_label["laplace"]), ("gaussian", by_label["gaussian"]),
                                 ("envelope", _envelope(cell)))]
    return verdict(trained["loss"], cell["budget"]["data_independent_loss"], strongest, rows)


def time_sharing_line(cells: list[dict]) -> str:
    """How time-sharing compares with the envelope by mean AUC and by TPR at 1% FPR, over the budgets of one
    population (module docstring)."""
    below = highest = 0
    for cell in cells:
        sharing = next(entry for entry in cell["references"] if entry["label"] == "time-sharing")
        below += sharing["auc"] < _envelope(cell)["auc"]
        highest += sharing["tpr_at_1pct_fpr"] >= max(entry["tpr_at_1pct_fpr"] for entry in cell["references"])
    return (f"- Time-sharing reads a lower mean AUC than the envelope at {below} of {len(cells)} budgets, and the "
            f"highest TPR at 1% FPR of every mechanism at {highest} of {len(cells)}: each of its releases is f(theta) "
            "or f(D) itself, which a mean over releases hides and TPR at low FPR shows.")


def _table(cells: list[dict]) -> list[str]:
    labels = [entry["label"] for entry in cells[0]["references"]]
    lines = ["| budget (x L0) | U | " + " | ".join(labels) + " | envelope | BNGP (trained) | BNGP, strongest of all attacks |",
             "|---" * (len(labels) + 5) + "|"]
    for cell in sorted(cells, key=lambda item: -item["fraction"]):
        by_label = {entry["label"]: entry for entry in cell["references"]}
        parts = [(f"{'' if by_label[label].get('converged', True) else '>= '}{by_label[label]['auc']:.3f} / "
                  f"{by_label[label]['tpr_at_1pct_fpr']:.2f}") if label in by_label else "-" for label in labels]
        envelope = _envelope(cell)
        strongest = cell["evaluation"]["trained"]
        lines.append(f"| {cell['fraction']:g} | {cell['budget']['budget']:.5f} | " + " | ".join(parts)
                     + f" | {envelope['auc']:.3f} | {cell['trained']['auc']:.3f} / {cell['trained']['tpr_at_1pct_fpr']:.2f} | "
                     f"{strongest['auc']:.3f} ({strongest['strongest_attack']}) / {strongest['tpr_at_1pct_fpr']:.2f} |")
    return lines


def _audit_table(cells: list[dict]) -> list[str]:
    labels = [entry["label"] for entry in cells[0]["references"]]
    lines = ["| budget (x L0) | " + " | ".join(labels) + " | BNGP (trained) |", "|---" * (len(labels) + 2) + "|"]
    for cell in sorted(cells, key=lambda item: -item["fraction"]):
        by_label = {entry["label"]: entry for entry in cell["references"]}
        parts = [f"{by_label[label]['audited_epsilon_lb']:.2f}" if label in by_label else "-" for label in labels]
        lines.append(f"| {cell['fraction']:g} | " + " | ".join(parts) + f" | {cell['trained']['audited_epsilon_lb']:.2f} |")
    return lines


def _plot(results: dict[str, list[dict]], path: Path) -> Path:
    """Utility budget against AUC (top) and TPR at 1% FPR (bottom), one column per population; each
    reference family (those shaped to the candidates' row space apart), the envelope and the trained defender
    in their colours of :mod:`bngp.colours` (the same in every plot), one legend right of the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = list(results)
    figure, axes = plt.subplots(2, len(names), figsize=(4.6 * len(names) + 2.4, 7.2), dpi=120, squeeze=False,
                                layout="constrained")
    for column, name in enumerate(names):
        cells = sorted(results[name], key=lambda item: item["budget"]["budget"])
        budgets = [cell["budget"]["budget"] for cell in cells]
        families: dict[str, list[tuple[float, float, float]]] = {}
        for cell in cells:
            for entry in cell["references"]:
                point = (cell["budget"]["budget"], entry["auc"], entry["tpr_at_1pct_fpr"])
                # "shrinkage laplace a=0.2" -> "shrinkage"; noise shaped to the population is a family of its own
                kind = family(entry["label"]) + (" (row space)" if " population" in entry["label"] else "")
                current = families.setdefault(kind, [])
                if current and current[-1][0] == point[0]:
                    current[-1] = min(current[-1], point, key=lambda item: item[1])  # the best shrinkage of the grid
                else:
                    current.append(point)
        for row, (metric, index) in enumerate((("AUC (converged linear attack)", 1), ("TPR at 1% FPR", 2))):
            axis = axes[row][column]
            for kind, points in families.items():
                axis.plot([p[0] for p in points], [p[index] for p in points], marker=".", label=kind,
                          color=method_colour(kind), alpha=0.85,
                          linestyle="--" if kind == "time-sharing" else "-." if kind.endswith("(row space)") else "-")
            envelope = [_envelope(cell) for cell in cells]
            key = "auc" if index == 1 else "tpr_at_1pct_fpr"
            axis.plot(budgets, [entry[key] for entry in envelope], color=role_colour("envelope"), linewidth=2.2,
                      label="envelope (best reference)")
            axis.plot(budgets, [cell["trained"][key] for cell in cells], marker="*", markersize=12, linestyle="none",
                      color=method_colour("bngp-budget"), markeredgecolor="white", markeredgewidth=0.5,
                      label="BNGP (trained for the budget)", zorder=4)
            axis.set_xlabel("utility budget U = mean |x - f(D)|")
            axis.xaxis.set_major_locator(MaxNLocator(5))  # labels that do not overlap
            axis.set_ylabel(metric)
            axis.set_title(name, fontsize=10)
            axis.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside right upper", fontsize=8)
    return save_png(figure, path)


def run_budget_frontier(*, scale: str, seed: int, out: Path, budget: Budget, progress: bool = True) -> ReproductionResult:
    """Run the budget frontier of ``scale`` and write its report directory (module docstring)."""
    started = time.perf_counter()
    populations, fractions = BUDGET_FRONTIER[scale]
    stem = f"{scale}_seed{seed}"
    root = Path(out) / "budget-frontier"
    cells_dir, runs_dir = root / "cells" / stem, root / "runs" / stem
    cells_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict]] = {}
    for entry in populations:
        population = make_population(entry.dataset, entry.sizes, seed)
        results[entry.label] = []
        for fraction in fractions:
            name = f"{_slug(entry.label)}_{fraction:g}"
            path = cells_dir / f"{name}.json"
            if path.is_file():
                cell = json.loads(path.read_text())
            else:
                cell = frontier_cell(population, entry.sizes.members, fraction, seed, budget, runs_dir / name)
                write_json(path, cell)
            results[entry.label].append(cell)
            if progress:
                print(f"[budget-frontier] {entry.label} {fraction:g} x L0: references {cell['best_reference']} "
                      f"{_envelope(cell)['auc']:.4f}, trained {cell['trained']['auc']:.4f}", flush=True)
    wall = time.perf_counter() - started
    peak, matmul = peak_rss_bytes(), matmul_flops(*REFERENCE_MATMUL)
    target = root / stem
    staging = fresh_staging(target)
    _plot(results, staging / "frontier.png")
    lines = [f"# {TITLE}", "", __doc__.split("\n\n")[1].replace("\n", " "), "",
             f"`bngp reproduce budget-frontier --scale {scale} --seed {seed}`: budgets {list(fractions)} x L0; "
             f"{budget.steps} defender steps at most, {budget.releases} evaluation releases. Wall time {wall:.1f} s (the "
             f"cells' own compute, reused ones included: {sum(c['seconds'] for cs in results.values() for c in cs):.0f} s) at a "
             f"float32 matmul throughput of {matmul / 1e9:.1f} GFLOP/s measured in the same run, peak memory "
             f"{peak / 2**30:.2f} GiB.", ""]
    lines += frontier_plot_lines(scale, "Each reference cell: AUC / TPR at 1% FPR of the converged linear attack (ridge and "
                                 "whitened maps and the map at the mechanism's known law, the strongest; >=: a "
                                 "reference the ranking screened out, at its screening reading, which the converged "
                                 "attack would read at least as high). The last column: the strongest of every attack of "
                                 "`bngp evaluate --attacks all` against the trained defender.")
    for entry in populations:
        cells = results[entry.label]
        lines += [f"## {entry.label} ({entry.regime}; {entry.sizes.describe()})", "", *_table(cells), "",
                  *verdicts(cells), time_sharing_line(cells), "",
                  f"Audited eps lower bounds (many-run canary audit, {AUDIT_CANARIES} canaries at most, {AUDIT_RUNS} "
                  f"releases, attack `{AUDIT_ATTACK}`, 95% confidence):", "", *_audit_table(cells), ""]
        for cell in sorted(cells, key=lambda item: -item["fraction"]):
            start = cell["trained"]["start"]
            moved = start.get("final_state_moved", {})
            change = ("" if not moved else f"; the training's last state (step {start.get('final_step')}) had mean "
                      f"shrinkage {moved['shrink_mean'][0]:.3f} -> {moved['shrink_mean'][1]:.3f} and mean noise scale "
                      f"{moved['scale_mean'][0]:.2e} -> {moved['scale_mean'][1]:.2e}")
            lines.append(f"- {cell['fraction']:g} x L0: started from {start['reference']}, delivered the {start['kept']} "
                         f"state ({start['reason']}){change}.")
        lines.append("")
    write_text(staging / "report.md", "\n".join(lines))
    write_json(staging / "results.json", {
        "experiment": "budget-frontier", "title": TITLE, "scale": scale, "seed": seed, "fractions": list(fractions),
        "populations": [{"label": entry.label, "dataset": entry.dataset, "sizes": asdict(entry.sizes),
                         "regime": entry.regime} for entry in populations],
        "budget": asdict(budget), "cells": results,
        "rows": [{"setting": f"{label}, BNGP at {cell['fraction']:g} x L0", "attack": cell["evaluation"]["trained"]["strongest_attack"],
                  "auc": cell["evaluation"]["trained"]["auc"], "paper": None}
                 for label, cells in results.items() for cell in cells],
        "differing_cells": [], "wall_seconds": wall, "matmul_flops_float32": matmul,
        "peak_rss_bytes": peak, "environment": environment(),
    })
    commit_run(staging, target, {"experiment": "budget-frontier", "scale": scale, "seed": seed})
    if progress:
        print(f"[budget-frontier] wrote {target} ({wall:.1f} s)", flush=True)
    return ReproductionResult("budget-frontier", scale, seed, target, wall, peak, ())
