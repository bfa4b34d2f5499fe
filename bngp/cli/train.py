"""``bngp train``: train a BNGP defender against a cross-entropy attacker (the general-sum GAN)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from bngp.cli import COMMANDS
from bngp.cli.common import (
    add_device_arg, add_population_args, add_threads_arg, load_kappa_file, load_population_and_prior, parse_patience,
)
from bngp.device import resolve_device
from bngp.errors import InputError
from bngp.data.population import Population
from bngp.game import (
    ATTACKER_KINDS, CHECKPOINT_FILE, OBJECTIVES, AttackerSettings, DefenderSettings, FreshCheckSettings, Game, GameConfig,
    ObjectiveSettings, SelectionSettings,
)
from bngp.data.geometry import THREAT_MODEL
from bngp.game.response import RESPONSE_OBJECTIVES, best_response_start
from bngp.game.start import start_config
from bngp.references import check_linear_attack_memory, rank_references
from bngp.defenses.budget import BudgetSetting
from bngp.outputs import check_output_folder
from bngp.run_dir import add_to_run, check_run_target, staging_dir
from bngp.defenses.dp import GaussianDefense
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.defenses.trained import load_run_defense
from bngp.decision import ReleaseDecision, check_decision_memory, decide_release


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    defaults = GameConfig()
    parser = subparsers.add_parser(
        "train",
        help=COMMANDS["train"][1],)
    add_threads_arg(parser)
    add_device_arg(parser, "training (the defender and attacker networks, the in-game refits)")
    add_population_args(parser)
    parser.add_argument("--kappa", type=float, default=0.0, help="privacy-utility trade-off weight (>= 0)")
    parser.add_argument("--kappa-file", metavar="W.npy", help="per-attribute weights kappa_j (overrides --kappa)")
    parser.add_argument("--objective", choices=OBJECTIVES, default="preference", help="defender objective (paper section 3.3)")
    parser.add_argument("--budget", type=float, help="budget of --objective utility-budget or privacy-budget (for a "
                        "utility budget prefer --utility-budget)")
    parser.add_argument("--utility-budget", metavar="U",
                        help="train the most private defender whose mean |x - f(D)| (frequency units) is at most U; "
                             "U is absolute (e.g. 0.007) or a fraction of the loss of the data-independent release "
                             "f(theta), which leaks nothing (e.g. 0.5x)")
    parser.add_argument("--start", choices=("best-reference", "data-independent"), metavar="best-reference|data-independent",
                        help="where G starts: the reference mechanism at the budget that a converged linear attack reads "
                             "least (Laplace, Gaussian, shrinkage towards f(theta) plus noise, suppression, the "
                             "linear-decoder optimum and, with no more candidates than attributes, noise shaped "
                             "to the candidates' row space; default with --utility-budget), or f(theta) itself (the "
                             "default otherwise). Threat model: " + THREAT_MODEL)
    _add_response_args(parser)
    parser.add_argument("--steps", type=int, default=defaults.steps, help="defender updates")
    parser.add_argument("--attacker-steps", type=int, default=defaults.attacker.steps,
                        help="attacker updates per defender update")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size, help="membership draws per update")
    parser.add_argument("--against", default="bayesian", metavar="ATTACK",
                        help="bayesian (the BNGP game, default) or a differentiable attack for a best-response "
                             "defender: lrt, adaptive-lrt, score, reconstruction")
    parser.add_argument("--dp-epsilon", type=float, metavar="EPS",
                        help="BGBP response constraint DPH^eps (pure-DP BNGP, paper section 4.3)")
    parser.add_argument("--compose", action="append", default=[], metavar="SPEC",
                        help="a fixed Gaussian mechanism released before the learned one (repeatable; e.g. "
                             "gaussian:epsilon=1,delta=1e-5 or gaussian:scale=0.01,delta=1e-5): the defender is "
                             "trained over the whole composition (paper App. L.6)")
    parser.add_argument("--whole-release-attacker", action="store_true",
                        help="with --compose: the in-game attacker reads the whole composed release instead of the "
                             "fixed copies pooled by their inverse-variance mean next to the learned block "
                             "(slower)")
    parser.add_argument("--dp-penalty", type=float, default=defaults.objective.dp_penalty, help="weight of the BGBP penalty")
    parser.add_argument("--attacker-init", choices=("reconstruction", "paper"), default=defaults.attacker.init,
                        help="in-game attacker: population-informed linear head, or the plain paper network")
    parser.add_argument("--attacker", default=defaults.attacker.kind, metavar="KIND",
                        help=f"in-game attacker H: {' or '.join(ATTACKER_KINDS)} (population = one output per known "
                             "individual, the paper's; per-individual = H(x, d_k) with weights shared across "
                             "individuals)")
    parser.add_argument("--individual-batch", type=int, metavar="N",
                        help="with --attacker per-individual: individuals scored per update, a random subset "
                             "(default all K; refits and evaluations always score all K)")
    parser.add_argument("--refit-every", type=int, default=defaults.attacker.refit_every, metavar="STEPS",
                        help="defender steps between closed-form refits of the in-game attacker (0 = never)")
    parser.add_argument("--selection-patience", default=str(defaults.selection.patience).lower(), metavar="P|none",
                        help="stop training once the defender state kept has not been bettered by the P refits "
                             "after it (every --refit-every steps); none: all --steps (default: %(default)s)")
    parser.add_argument("--eval-every", type=int, default=defaults.eval_every, metavar="STEPS",
                        help="defender steps between held-out evaluations")
    parser.add_argument("--eval-batch", type=int, default=defaults.eval_batch, metavar="N",
                        help="membership draws in the held-out evaluation batch")
    parser.add_argument("--fresh-check-steps", type=int, default=defaults.fresh_check.steps,
                        help="steps of the fresh attacker trained after training (0 = skip)")
    parser.add_argument("--fresh-check-patience", default=str(defaults.fresh_check.patience), metavar="P|none",
                        help="stop that attacker after P validations (every 100 steps) without a lower validation "
                             "loss; none: all steps (default: %(default)s)")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run (RUN_DIR.incomplete) or a complete one from its last checkpoint")
    parser.add_argument("--force", action="store_true", help="replace an existing RUN_DIR when the new run completes")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (recorded in config.json and the manifest)")
    parser.add_argument("--no-decision", dest="decision", action="store_false",
                        help="skip the release decision (by default the delivered defender is read by a converged "
                             "linear attack beside matched Laplace, Gaussian and the best reference mechanism at its "
                             "utility loss, and RUN_DIR gets decision.json and decision.md)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory (written as RUN_DIR.incomplete until complete)")
    parser.set_defaults(func=run)


def _add_response_args(parser: argparse.ArgumentParser) -> None:
    """The flags of the best-response descent before the game (bngp.game.response)."""
    parser.add_argument("--response", choices=RESPONSE_OBJECTIVES, metavar="|".join(RESPONSE_OBJECTIVES),
                        help="with --utility-budget: before the game, descend from the best reference along the "
                             "budget by the gradient through the attacker's best linear response (the "
                             "linear-Gaussian decoder of the release's known law), for the mean AUC, the TPR at 1%% "
                             "FPR or the most exposed candidate's AUC; its state starts G only where a converged "
                             "linear attack reads it below the best reference by two standard errors")
    parser.add_argument("--response-steps", type=int, default=200, metavar="STEPS",
                        help="steps of that descent (default: %(default)s)")


def composed_gaussian_sigmas(specs: list[str], population: Population, n_members: int) -> tuple[float, ...]:
    """Noise scales of the ``--compose`` mechanisms, each a gaussian defense SPEC calibrated on the data."""
    sigmas = []
    for spec in specs:
        defense = parse_defense_spec(spec, DefenseContext(population, n_members))
        if not isinstance(defense, GaussianDefense):
            raise InputError(f"`--compose` takes gaussian mechanisms only, got {spec!r}.")
        sigmas.append(defense.sigma)
    return tuple(sigmas)


#: the command-line flag of each GameConfig setting it sets, for the messages of GameConfig's checks.
_FLAGS = {"steps": "--steps", "attacker_steps": "--attacker-steps", "batch_size": "--batch-size", "objective": "--objective",
          "kappa": "--kappa", "budget": "--budget", "against": "--against", "dp_epsilon": "--dp-epsilon",
          "dp_penalty": "--dp-penalty", "fixed_gaussian_sigmas": "--compose", "attacker_init": "--attacker-init",
          "attacker_kind": "--attacker", "individual_batch": "--individual-batch", "attacker_refit_every": "--refit-every",
          "eval_every": "--eval-every", "eval_batch": "--eval-batch", "fresh_check_steps": "--fresh-check-steps"}


def _check_flags(args: argparse.Namespace) -> None:
    """The combinations of flags this command accepts (GameConfig checks the values)."""
    if args.whole_release_attacker and not args.compose:
        raise InputError("`--whole-release-attacker` needs `--compose` (only a composed release has copies to pool).")
    if args.utility_budget is not None:
        if args.budget is not None:
            raise InputError("give the utility budget once: `--utility-budget` or `--budget`, not both.")
        if args.objective == "privacy-budget":
            raise InputError("`--utility-budget` trains for a utility budget; it cannot be combined with --objective privacy-budget.")
        args.objective = "utility-budget"
    elif args.objective != "preference" and args.budget is None:
        raise InputError(f"`--budget` is required with --objective {args.objective}.")
    if args.objective == "preference" and args.budget is not None:
        raise InputError("`--budget` needs a budget objective: use --utility-budget U, or --objective privacy-budget --budget B.")
    if args.start == "best-reference" and args.objective != "utility-budget":
        raise InputError("`--start best-reference` needs a utility budget (--utility-budget U).")
    if args.response is not None and not _starts_at_reference(args):
        raise InputError("`--response` descends from the best reference: it needs --utility-budget U and "
                         "--start best-reference.")
    if args.response_steps < 0:
        raise InputError(f"`--response-steps` must be >= 0, got {args.response_steps}.")
    if _starts_at_reference(args) and (args.compose or args.against != "bayesian" or args.dp_epsilon is not None):
        raise InputError("`--start best-reference` starts a plain release; give --start data-independent with "
                         "--compose, --against or --dp-epsilon.")


def _starts_at_reference(args: argparse.Namespace) -> bool:
    return (args.start or "best-reference") == "best-reference" and args.objective == "utility-budget"


def _game_config(args: argparse.Namespace, population: Population, budget: float | None) -> GameConfig:
    """The run's GameConfig from the flags; GameConfig's messages name the flags."""
    kappa_vector = None
    if args.kappa_file:
        kappa_vector = tuple(float(v) for v in load_kappa_file(args.kappa_file, population.n_attributes))
    try:
        return GameConfig(
            steps=args.steps, batch_size=args.batch_size, eval_every=args.eval_every, eval_batch=args.eval_batch,
            seed=args.seed,
            objective=ObjectiveSettings(kind=args.objective, kappa=args.kappa, kappa_vector=kappa_vector, budget=budget,
                                        against=args.against, dp_epsilon=args.dp_epsilon, dp_penalty=args.dp_penalty),
            defender=DefenderSettings(fixed_gaussian_sigmas=composed_gaussian_sigmas(args.compose, population, args.members)),
            attacker=AttackerSettings(kind=args.attacker, init=args.attacker_init, steps=args.attacker_steps,
                                      individual_batch=args.individual_batch, refit_every=args.refit_every,
                                      pool_copies=not args.whole_release_attacker),
            selection=SelectionSettings(patience=parse_patience(args.selection_patience, "--selection-patience")),
            fresh_check=FreshCheckSettings(steps=args.fresh_check_steps,
                                           patience=parse_patience(args.fresh_check_patience, "--fresh-check-patience")),
        )
    except InputError as exc:
        message = str(exc)
        for name, flag in _FLAGS.items():
            message = message.replace(f"`{name}`", f"`{flag}`")
        raise InputError(message) from None


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)  # before any work: no run directory without the device
    _check_flags(args)
    check_output_folder("--out", Path(args.out))
    check_run_target(args.out, resume=args.resume, force=args.force, checkpoint=CHECKPOINT_FILE)
    population, prior = load_population_and_prior(args.population, args.members)
    ranking, budget, setting = None, None, None
    if args.objective == "utility-budget":
        setting = BudgetSetting.of(population, args.members)
        budget = setting.resolve(args.utility_budget if args.utility_budget is not None else args.budget)
        print(f"utility budget {budget.describe()}", file=sys.stderr)
    config = _game_config(args, population, budget.value if budget is not None else args.budget)
    ranked = budget is not None and _starts_at_reference(args)
    if ranked:  # the references release one copy of f(D); checked before any work, as is the decision
        check_linear_attack_memory(population, 1, "; start from f(theta) with --start data-independent")
    if args.decision:  # the delivered defender releases one copy of f(D) per fixed mechanism and its own
        check_decision_memory(population, len(config.defender.fixed_gaussian_sigmas) + 1)
    if ranked:
        if not args.quiet:
            print("ranking the reference mechanisms at the budget by a converged linear attack ...", file=sys.stderr)
        ranking = rank_references(population, args.members, budget.given, seed=args.seed, setting=setting,
                                  progress=not args.quiet)
        best = ranking.best_score
        print(f"starting from {best.label}: linear-attack AUC {best.auc:.4f}, TPR at 1% FPR {best.tpr_at_1pct:.3f}",
              file=sys.stderr)
        config = start_config(ranking, config)
    start = None if ranking is None else ranking.best
    start_record = None if ranking is None else {"reference": ranking.best_score.label, "ranking": ranking.to_dict()}
    if args.response is not None:
        if not args.quiet:
            print(f"descending along the budget against the best linear response ({args.response}) ...", file=sys.stderr)
        start, start_record["response"] = best_response_start(ranking, setting, population, args.members, args.response,
                                                               args.response_steps, args.seed)
        choice = start_record["response"]["choice"]
        print(f"best response: kept the {'descent' if choice['kept'] == 'trained' else 'best reference'}; "
              f"{start_record['response']['choice']['reason']}", file=sys.stderr)
        config = replace(config, defender=replace(config.defender, noise_law=start.law))
    game = Game(population, prior, config, device=device, start=start, start_record=start_record)
    try:
        summary = game.train(args.out, resume=args.resume, force=args.force, progress=not args.quiet)
    except KeyboardInterrupt:
        if (staging_dir(args.out) / CHECKPOINT_FILE).is_file():
            raise KeyboardInterrupt(f"the progress is kept in {staging_dir(args.out)}: run the same command with "
                                    "--resume to continue it") from None
        raise
    report = {
        "run": args.out,
        "steps": summary.steps,
        "selected_step": summary.selected["step"] if summary.selected else None,
        "stopped_early_at": summary.early_stop["step"] if summary.early_stop else None,
        "in_game_attacker_auc": summary.in_game_auc,
        "utility_loss": summary.utility_loss,
        "fresh_attacker_auc": summary.fresh_attacker_auc,
        "strongest_fresh_auc": summary.strongest_fresh_auc,
        "collapse_warning": summary.collapse.warning,
        "attacker": config.attacker.kind,
        "device": str(device),
    }
    if summary.budget is not None:
        report["budget"] = summary.budget.to_dict()
    if summary.start is not None:
        report["start"] = {key: summary.start[key] for key in ("reference", "kept", "reason", "final_state_moved") if key in summary.start}
    if config.defender.fixed_gaussian_sigmas:
        report["composed_gaussian_sigmas"] = list(config.defender.fixed_gaussian_sigmas)
    if summary.bgbp is not None:
        report["bgbp_epsilon"] = summary.bgbp.epsilon
        report["implied_epsilon"] = summary.bgbp.implied_epsilon
        check = summary.fresh_attacker_check or {}
        report["dp_bound_violation_rate"] = check.get("dp_bound_violation_rate")
    decision = None
    if args.decision:
        budgeted = args.objective == "utility-budget"
        decision = _decide(args, population, budget if budgeted else None, setting, ranking,
                           summary.budget.kept_state_value if budgeted else None)
        report["decision"] = {"verdict": decision.verdict, "sentence": decision.sentence,
                              "files": [str(Path(args.out) / name) for name in DECISION_FILES]}
    print(json.dumps(report, indent=2))
    if decision is not None:
        print("\n".join(decision.summary_lines()), file=sys.stderr)
    return 0


#: the files the decision adds to a trained run.
DECISION_FILES = ("decision.json", "decision.md")


def _decide(args: argparse.Namespace, population: Population, budget, setting, ranking,
            loss: float | None) -> ReleaseDecision:
    """The release decision of the delivered defender (:mod:`bngp.decision`), added to the run; a defender
    trained for a budget is compared with the references ranked at its budget, at the loss the training
    measured (``loss``, the same measurement)."""
    if not args.quiet:
        print("reading the delivered defender beside matched Laplace, Gaussian and the reference mechanisms ...",
              file=sys.stderr, flush=True)
    defense = load_run_defense(args.out, DefenseContext(population, args.members))
    decision = decide_release(population, args.members, defense, budget=budget, seed=args.seed, setting=setting,
                              ranking=ranking, loss=loss, progress=not args.quiet)
    title = f"## Decision for the defender trained in `{args.out}`\n\n"
    add_to_run(args.out, {DECISION_FILES[0]: json.dumps(decision.to_dict(), indent=2) + "\n",
                          DECISION_FILES[1]: title + "\n".join(decision.markdown_lines()[2:])})
    return decision
