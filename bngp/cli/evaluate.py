"""``bngp evaluate``: attack a defense with membership-inference attacks and report ROC/AUC."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bngp.cli import COMMANDS
from bngp.data.geometry import THREAT_MODEL
from bngp.attacks.registry import parse_attack_names
from bngp.attacks.training import AttackerTrainingConfig
from bngp.cli.common import (add_device_arg, add_population_args, add_threads_arg, add_workers_arg, load_population_and_prior,
                             parse_patience)
from bngp.device import resolve_device
from bngp.decision import check_decision_memory, decide_release, strongest_of_evaluation
from bngp.game.config import BUDGET_TOLERANCE
from bngp.evaluate import evaluate_defense
from bngp.errors import InputError
from bngp.io_utils import atomic_write, write_json, write_text
from bngp.report import evaluation_markdown, plot_learning_curves, plot_roc
from bngp.outputs import add_force_arg, claim_outputs
from bngp.workers import resolve_workers
from bngp.defenses.base import Defense
from bngp.defenses.budget import BudgetSetting, UtilityBudget
from bngp.defenses.registry import DefenseContext, defense_help, parse_defense_spec
from bngp.defenses.trained import TrainedDefense


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help=COMMANDS["evaluate"][1],)
    add_threads_arg(parser)
    add_workers_arg(parser)
    add_device_arg(parser, "the Bayesian attacker's network")
    add_population_args(parser)
    parser.add_argument("--defense", required=True, metavar="SPEC",
                        help=defense_help() + ". space=population confines the noise to the candidates' row space; "
                             "threat model: " + THREAT_MODEL)
    parser.add_argument("--attacks", required=True, metavar="NAMES", help="comma-separated attack names, or all")
    parser.add_argument("--releases", type=int, default=50, help="independent evaluation releases (AUC std over these)")
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed (releases, attack set-up)")
    parser.add_argument("--out", required=True, metavar="EVAL.json", help="JSON report (EVAL.md and EVAL.png beside it)")
    parser.add_argument("--scores-out", metavar="SCORES.npz", help="raw scores (releases x targets) and labels")
    parser.add_argument("--attacker-steps", type=int, default=AttackerTrainingConfig.steps, metavar="S",
                        help="most training steps of the Bayesian attacker (default: %(default)s)")
    parser.add_argument("--attacker-patience", default=str(AttackerTrainingConfig.patience), metavar="P|none",
                        help="stop the Bayesian attacker after P validations (every 100 steps) without a lower "
                             "validation loss; none: all steps (default: %(default)s)")
    parser.add_argument("--utility-budget", metavar="U",
                        help="state whether the defense meets this budget on mean |x - f(D)| (absolute, or a fraction "
                             "of the data-independent release's loss such as 0.5x); a defender trained for a utility "
                             "budget is checked against its own by default")
    parser.add_argument("--no-decision", dest="decision", action="store_false",
                        help="skip the release decision (by default the report opens with it: the utility loss, the "
                             "strongest attack, and matched Laplace, Gaussian and the best reference mechanism at the "
                             "same loss (with no more candidates than attributes, Gaussian noise in the candidates' row "
                             "space too) read by a converged linear attack, with a verdict)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--plot", metavar="ROC.png", help="ROC plot path (default: next to EVAL.json)")
    add_force_arg(parser, "EVAL.json and the files written beside it")
    parser.set_defaults(func=run)


def trained_budget(defense: Defense) -> float | None:
    """The utility budget a trained defender (``run:RUN_DIR``) was trained for, else None."""
    if isinstance(defense, TrainedDefense) and defense.artifact.config.get("objective") == "utility-budget":
        return float(defense.artifact.config["budget"])
    return None


def budget_check(setting: BudgetSetting, budget: UtilityBudget, defense: Defense) -> dict:
    """The budget, the defense's loss by :meth:`BudgetSetting.measured_loss` (the measurement ``bngp train``
    reports for the same defender) and whether it meets the budget (within the training's tolerance)."""
    measured = setting.measured_loss(defense)
    return {**budget.to_dict(), "measured_loss": measured,
            "met": bool(measured <= budget.value * (1 + BUDGET_TOLERANCE) + 1e-12)}


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    out, plot_path = Path(args.out), Path(args.plot) if args.plot else Path(args.out).with_suffix(".png")
    if out.suffix.lower() in (".md", ".png"):
        raise InputError(f"`--out` {out} must not end in .md or .png: the report is written next to it.")
    curve_path = plot_path.with_name(plot_path.stem + ".learning.png")
    outputs = claim_outputs("--out", out, [out.with_suffix(".md"), plot_path, curve_path,
                                           *([args.scores_out] if args.scores_out else [])], force=args.force)
    if args.releases < 2:
        raise InputError(f"`--releases` must be >= 2, got {args.releases}.")
    if args.attacker_steps < 0:
        raise InputError(f"`--attacker-steps` must be >= 0, got {args.attacker_steps}.")
    attacker = AttackerTrainingConfig(steps=args.attacker_steps, patience=parse_patience(args.attacker_patience, "--attacker-patience"))
    resolve_workers(args.workers, 0)  # a bad value fails before any work
    population, prior = load_population_and_prior(args.population, args.members)
    parse_attack_names(args.attacks)  # unknown names fail before any work
    defense = parse_defense_spec(args.defense, DefenseContext(population, args.members))
    budget_text = args.utility_budget if args.utility_budget is not None else trained_budget(defense)
    setting = budget = None
    if budget_text is not None:  # a budget at or above the data-independent loss fails before any work
        setting = BudgetSetting.of(population, args.members)
        budget = setting.resolve(budget_text)
    if args.decision:  # a decision that would not fit in memory fails before any work
        check_decision_memory(population, defense.composition, defense)
    workers = resolve_workers(args.workers, population.n_individuals * population.n_attributes * defense.composition)
    result = evaluate_defense(population, prior, defense, args.attacks, releases=args.releases, seed=args.seed,
                              n_members=args.members, progress=not args.quiet, device=device, attacker=attacker,
                              workers=workers)
    payload = result.to_dict()
    payload["defense"]["spec"] = args.defense
    if budget is not None:
        payload["budget"] = budget_check(setting, budget, defense)
    decision = None
    if args.decision:
        if not args.quiet:
            print("reading matched Laplace, Gaussian and the reference mechanisms at the same utility loss ...",
                  file=sys.stderr, flush=True)
        decision = decide_release(population, args.members, defense, strongest=strongest_of_evaluation(payload),
                                  budget=budget, seed=args.seed, setting=setting,
                                  loss=payload["budget"]["measured_loss"] if budget is not None else None,
                                  progress=not args.quiet)
        payload["decision"] = decision.to_dict()
    payload["roc_plot"] = str(plot_path)
    curves = {name: attack.learning_curve for name, attack in result.attacks.items() if attack.learning_curve is not None}
    training = {name: attack.training_curve for name, attack in result.attacks.items() if attack.training_curve}
    if curves or training:
        payload["learning_curve_plot"] = str(curve_path)
    with outputs.staged() as stage:
        plot_roc({name: (scores, result.labels) for name, scores in result.scores.items()}, stage(plot_path),
                 title=f"Attacks vs {args.defense}", baseline_loss=result.utility["data_independent_utility_loss"])
        if curves or training:
            plot_learning_curves(curves, stage(curve_path), title=f"Learning curves vs {args.defense}", training=training)
        if args.scores_out:
            with atomic_write(stage(args.scores_out)) as handle:
                np.savez_compressed(handle, labels=result.labels,
                                    **{f"{name}_scores": scores for name, scores in result.scores.items()})
        write_text(stage(out.with_suffix(".md")), evaluation_markdown(
            result, title=f"Evaluation of `{args.defense}`", decision=payload.get("decision"), budget=payload.get("budget")))
        write_json(stage(out), payload)
    summary = {name: round(attack.auc, 4) for name, attack in result.attacks.items()}
    print(json.dumps({"defense": args.defense, "utility_loss": round(payload["utility_loss"], 6),
                      "data_independent_utility_loss": round(result.utility["data_independent_utility_loss"], 6), "auc": summary,
                      "strongest_attack": payload["strongest_attack"]["name"],
                      **({"budget": payload["budget"]} if budget is not None else {}),
                      **({"verdict": decision.verdict} if decision is not None else {})}))
    if decision is not None:
        print("\n".join(decision.summary_lines()), file=sys.stderr)
    return 0
