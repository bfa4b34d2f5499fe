"""``bngp audit-mechanism``: end-to-end empirical privacy audit of the release under a defense.

    bngp audit-mechanism --population POP.npz --defense SPEC --mode one-run|many-run|panoramia \\
        --canaries M --members N --attack NAME [--runs R] [--confidence C] [--delta D] \\
        [--neighbouring auto|replace|add-remove] [--real-nonmembers R] [--seed S] [--device auto|cpu|cuda] \\
        --out AUDIT.json

AUDIT.json (``format`` :data:`bngp.mechanism_audit.MECHANISM_AUDIT_FORMAT`) has ``epsilon_lb`` with
the defense's claimed guarantee next to it (``claimed_epsilon``, ``claimed_delta``,
``bound_exceeds_claim`` and ``claim_verdict`` in words), the largest eps the design can certify
(``epsilon_ceiling``: the same bound on a perfect attack's scores, :mod:`bngp.audit.ceiling`; its
``ceiling_state`` and ``reading``), the method's records, the design, the attack with its
knowledge statement and the seeds (same seed -> same file).  Bad input gives a one-line error and
exit code 2 before anything is written.

AUDIT.json also holds ``audit_decision`` (:func:`bngp.audit.audit_decision`: claim refuted, consistent,
at the design's ceiling, ...) and, unless ``--no-decision``, ``decision``: the release decision of
:func:`bngp.decision.decide_release` (the release's utility loss beside matched Laplace, Gaussian and the
best reference mechanism at that loss, each read by the converged linear attack, and a verdict).

Next to AUDIT.json (same stem) the command writes AUDIT.md (opening with both decisions; then the bound,
the ceiling, the claimed eps, a table of the bounds behind the number, notes on how to read it) and AUDIT.png:
the empirical trade-off curve (FPR on x, FNR on y) of the scores behind the bound with its region
(``diagnostics.tradeoff``; a valid simultaneous region for the many-run audit's best canary,
descriptive for the scores of one release), the claimed guarantee's (eps, delta)-DP curve and the
certified one at ``epsilon_lb``.

PANORAMIA reports two numbers (AUDIT.json ``panoramia``, and both on the summary line): eps_tilde
with generated non-members, a measurement (it assumes the generator's closeness c = c_lb), and,
with ``--real-nonmembers R`` individuals outside the dataset held out from the generator (default
min(M, (K - N) // 2, K - N - 10); 0: none), a lower bound from real non-members, which is then
``epsilon_lb`` (:mod:`bngp.mechanism_audit.panoramia_genome`, arXiv:2402.09477).

A defense that perturbs c > 1 copies of f(D) (``run:RUN_DIR`` of a run trained with
``--compose``, or ``matched-*:run=RUN_DIR`` of one; arXiv:2410.07414, App. L.6) is audited on its
whole release of c |Q| outputs; ``design.composition`` and ``design.release_outputs`` record it,
and a matched defense's claimed eps is that of the concatenated statistic.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from bngp.cli import COMMANDS
from bngp.audit import eps_delta_tradeoff
from bngp.mechanism_audit import DEFAULT_RUNS, MODES, NEIGHBOURING, MechanismAuditResult, audit_mechanism
from bngp.cli.common import add_device_arg, add_population_args, add_threads_arg, load_population_and_prior
from bngp.decision import check_decision_memory, decide_release
from bngp.device import resolve_device
from bngp.io_utils import write_json, write_text
from bngp.report import mechanism_audit_markdown, plot_tradeoff
from bngp.outputs import add_force_arg, claim_report_outputs
from bngp.defenses.registry import DefenseContext, defense_help, parse_defense_spec

__all__ = ["add_parser", "run"]

#: FPR values at which the claimed and certified trade-off functions are drawn.
_CURVE_X = np.unique(np.concatenate((np.linspace(0.0, 1.0, 501), np.geomspace(1e-6, 1.0, 301))))
#: the region's arrays that the plot reads from ``diagnostics.tradeoff``.
_REGION_KEYS = ("alpha", "beta", "alpha_upper", "beta_upper", "alpha_lower", "beta_lower", "confidence")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``audit-mechanism`` sub-command."""
    parser = subparsers.add_parser(
        "audit-mechanism",
        help=COMMANDS["audit-mechanism"][1],
        description=(
            "Run the allele-frequency release under a defense on audit datasets, attack it and turn the "
            "attack's scores into an empirical lower bound on eps (one-run, many-run) or PANORAMIA's "
            "measurement with generated non-members and its lower bound with real non-members; writes AUDIT.json "
            "with AUDIT.md (the bound beside the largest eps the design can certify and the defense's claimed eps) "
            "and AUDIT.png (the scores' trade-off curve, the claimed and the certified curves) next to it."
        ),
    )
    add_threads_arg(parser)
    add_device_arg(parser, "an attack that trains a network (bayesian)")
    add_population_args(parser, members=False)
    parser.add_argument(
        "--members",
        type=int,
        required=True,
        metavar="N",
        help="dataset size n the defense is built for (add-remove: the non-canary part of each dataset)",
    )
    parser.add_argument(
        "--defense",
        required=True,
        metavar="SPEC",
        help=defense_help(),
    )
    parser.add_argument("--mode", required=True, choices=MODES, help="audit design")
    parser.add_argument(
        "--canaries",
        type=int,
        required=True,
        metavar="M",
        help="canaries, each included with probability 1/2 (panoramia: audit-set size)",
    )
    parser.add_argument("--attack", required=True, metavar="NAME", help="attack producing the scores (e.g. score, lrt)")
    parser.add_argument(
        "--runs", type=int, default=None, metavar="R", help=f"many-run: independent releases (default {DEFAULT_RUNS})"
    )
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence 1 - beta in (0, 1) (default 0.95)")
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="delta of the bound (canary modes; default: the defense's claimed delta, else 0)",
    )
    parser.add_argument(
        "--neighbouring",
        choices=NEIGHBOURING,
        default="auto",
        help="canary modes: neighbouring relation of the design (default auto: the defense's, else replace)",
    )
    parser.add_argument(
        "--real-nonmembers",
        type=int,
        default=None,
        metavar="R",
        help=(
            "panoramia: individuals outside the dataset held out from the generator and audited as real "
            "non-members, for a valid lower bound next to the generated-non-member measurement "
            "(default min(M, (K - N) // 2, K - N - 10); 0: none)"
        ),
    )
    parser.add_argument("--seed", type=int, default=0, help="audit seed (default 0)")
    parser.add_argument("--no-decision", dest="decision", action="store_false",
                        help="skip the release decision (by default AUDIT.md opens with the audit's verdict and then the "
                             "release's utility loss beside matched Laplace, Gaussian and the best reference mechanism, "
                             "each read by the converged linear attack)")
    parser.add_argument("--out", required=True, metavar="AUDIT.json",
                        help="output JSON file; AUDIT.md and AUDIT.png are written next to it (same stem)")
    add_force_arg(parser, "AUDIT.json, AUDIT.md and AUDIT.png")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.set_defaults(func=run)
    return parser


def _guesses(record: dict[str, Any]) -> str:
    """A one-run record's guesses in words."""
    return (f"k+ = {record['k_plus']}, k- = {record['k_minus']}: {record['n_correct']} of {record['n_guesses']} "
            f"guesses correct; {record['union_bound']}")


def _rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's table: the bounds behind ``epsilon_lb`` with their ceilings."""
    method, design = payload["method"], payload["design"]
    if payload["mode"] == "one-run":
        fdp = method["fdp_one_run"]
        return [{"bound": "one-run (Steinke, Nasr, Jagielski)", "epsilon_lb": payload["epsilon_lb"],
                 "epsilon_ceiling": payload["epsilon_ceiling"], "kind": "lower bound",
                 "detail": f"{design['canaries']} canaries; {_guesses(method['one_run'])}"},
                {"bound": "f-DP one-run, Gaussian (Mahloujifar, Melis, Chaudhuri)", "epsilon_lb": fdp["epsilon_lb"],
                 "epsilon_ceiling": "-", "kind": "lower bound for a Gaussian privacy curve",
                 "detail": f"mu_lb = {fdp['mu_lb']:.4f} at delta {fdp['delta']:g}; {_guesses(fdp)}"}]
    if payload["mode"] == "many-run":
        best = method["clopper_pearson_best_canary"]
        record = next((entry for entry in method["per_canary"] if entry["canary"] == best), None)
        counts = ("no canary was in some releases and out of others" if record is None else
                  f"best canary {best}: FP {record['false_positives']}/{record['n_nonmembers']}, FN "
                  f"{record['false_negatives']}/{record['n_members']}")
        return [
            {"bound": f"per-canary clopper-pearson (best of {design['canaries']}, Bonferroni)",
             "epsilon_lb": method["clopper_pearson_epsilon_lb"],
             "epsilon_ceiling": method["clopper_pearson_epsilon_ceiling"], "kind": "lower bound",
             "detail": f"{counts}; {design['runs']} releases, error beta/2 shared by the canaries"},
            {"bound": f"pooled one-run ({design['runs']} x {design['canaries']} inclusions)",
             "epsilon_lb": method["pooled_one_run_epsilon_lb"],
             "epsilon_ceiling": method["pooled_one_run_epsilon_ceiling"], "kind": "lower bound",
             "detail": f"{_guesses(method['pooled_one_run'])}; error beta/2"},
        ]
    summary, rows = payload["panoramia"], []
    real = summary["real_nonmembers"]
    if real is not None:
        record = method["real_nonmembers"]
        rows.append({"bound": "real non-members (companion)", "epsilon_lb": real["epsilon_lb"],
                     "epsilon_ceiling": real["epsilon_ceiling"], "kind": "lower bound",
                     "detail": f"{real['members']} members, {real['nonmembers']} real non-members; "
                               f"{record['mia_true_positives']} of the {record['mia_predicted']} predicted members "
                               f"are members; {record['union_bound']}"})
    generated = summary["generated_nonmembers"]
    rows.append({"bound": "generated non-members (eps_tilde)", "epsilon_lb": generated["epsilon_tilde"],
                 "epsilon_ceiling": generated["epsilon_tilde_ceiling"], "kind": "measurement",
                 "detail": f"{generated['members']} members, {generated['nonmembers']} generated; c_lb = "
                           f"{generated['c_lb']:.4f}, (c+eps)_lb = {generated['c_plus_epsilon_lb']:.4f}"})
    return rows


def _figure(result: MechanismAuditResult, tradeoff: dict[str, Any] | None) -> tuple[dict | None, list]:
    """(region, curves) of the PNG: the scores' trade-off region, the claimed and certified curves."""
    region = None if tradeoff is None else {key: np.asarray(tradeoff[key]) if key != "confidence" else tradeoff[key]
                                            for key in _REGION_KEYS}
    curves = []
    if result.claimed is not None:
        epsilon, delta = result.claimed_epsilon, float(result.claimed.get("delta", 0.0))
        curves.append((f"claim of {result.claimed.get('mechanism', 'the defense')}: (eps = {epsilon:g}, "
                       f"delta = {delta:g})-DP curve", _CURVE_X, eps_delta_tradeoff(epsilon, delta)(_CURVE_X)))
    if result.is_lower_bound and np.isfinite(result.epsilon_lb):
        curves.append((f"certified by {result.mode}: (eps = {result.epsilon_lb:.3f}, delta = {result.delta:g})-DP "
                       "curve", _CURVE_X, eps_delta_tradeoff(result.epsilon_lb, result.delta)(_CURVE_X)))
    return region, curves


def run(args: argparse.Namespace) -> int:
    """Load, build the defense, audit, write AUDIT.png, AUDIT.md and AUDIT.json atomically, print a summary."""
    start = time.perf_counter()
    device = resolve_device(args.device)
    outputs, markdown_path, png_path = claim_report_outputs(args.out, force=args.force)
    out = outputs.paths[0]
    population, _ = load_population_and_prior(args.population, args.members)
    defense = parse_defense_spec(args.defense, DefenseContext(population, args.members))
    if args.decision:  # a decision that would not fit in memory fails before any work
        check_decision_memory(population, defense.composition, defense)
    result = audit_mechanism(
        population,
        defense,
        args.attack,
        mode=args.mode,
        canaries=args.canaries,
        members=args.members,
        runs=args.runs,
        confidence=args.confidence,
        delta=args.delta,
        neighbouring=args.neighbouring,
        real_nonmembers="auto" if args.real_nonmembers is None else args.real_nonmembers,
        seed=args.seed,
        progress=not args.quiet,
        device=device,
    )
    payload = result.to_dict()
    payload["defense"]["spec"] = args.defense
    decision = None
    if args.decision:
        if not args.quiet:
            print("reading matched Laplace, Gaussian and the reference mechanisms at the same utility loss ...",
                  file=sys.stderr, flush=True)
        decision = decide_release(population, args.members, defense, seed=args.seed, progress=not args.quiet)
        payload["decision"] = decision.to_dict()
    payload["population"] = str(args.population)
    payload["report"] = {"markdown": str(markdown_path), "png": str(png_path)}
    reading = result.reading()
    tradeoff = result.diagnostics.get("tradeoff")
    notes = reading.notes()
    if tradeoff is not None:
        validity = ("a simultaneous region at that confidence" if tradeoff["is_test"] else
                    "descriptive only: they are not independent runs, so the region is not a test")
        notes.append(f"The plot's trade-off region is that of {tradeoff['scores']}: {validity}.")
    region, curves = _figure(result, tradeoff)
    with outputs.staged() as stage:
        plot_tradeoff(stage(png_path), region=region, curves=curves,
                      title=f"bngp audit-mechanism ({args.mode}, attack {args.attack})\n{args.defense}")
        write_text(stage(markdown_path), mechanism_audit_markdown(payload, _rows(payload), notes))
        write_json(stage(out), payload)
    claim = "no claimed guarantee" if result.claimed is None else f"claimed eps {result.claimed_epsilon:g}"
    kind = "lower bound" if result.is_lower_bound else "measurement"
    if result.panoramia is not None:
        real = result.panoramia["real_nonmembers"]
        eps_tilde = result.panoramia["generated_nonmembers"]["epsilon_tilde"]
        if real is None:
            kind = "eps_tilde with generated non-members, a measurement; no real non-members"
        else:
            kind = (
                f"lower bound with {real['nonmembers']} real non-members; eps_tilde = {eps_tilde:.4f} with "
                "generated non-members, a measurement"
            )
    print(
        f"epsilon_lb = {result.epsilon_lb:.4f} ({args.mode} {kind}, {claim}, confidence {result.confidence:g}, "
        f"delta {result.delta:g}, attack {args.attack}, {time.perf_counter() - start:.1f} s) -> {args.out}, "
        f"{markdown_path}, {png_path}"
    )
    print(reading.sentence + ("" if reading.claim_verdict is None else f"; {reading.claim_verdict}"))
    print(f"audit: {payload['audit_decision']['sentence']}")
    if decision is not None:
        print("\n".join(decision.summary_lines()))
    return 0
