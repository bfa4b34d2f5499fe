"""``bngp audit-mechanism``: end-to-end empirical privacy audit of the release under a defense.

    bngp audit-mechanism --population POP.npz --defense SPEC --mode one-run|many-run|panoramia \\
        --canaries M --members N --attack NAME [--runs R] [--confidence C] [--delta D] \\
        [--neighbouring auto|replace|add-remove] [--real-nonmembers R] [--seed S] [--device auto|cpu|cuda] \
        --out AUDIT.json

AUDIT.json has ``epsilon_lb`` with the defense's claimed guarantee next to it
(``claimed_epsilon``, ``claimed_delta``, ``bound_exceeds_claim``), the method's records, the
design, the attack with its knowledge statement and the seeds (same seed -> same file).  Bad
input gives a one-line error and exit code 2 before anything is written.

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
import time

from bngp.cli import COMMANDS
from bngp.mechanism_audit import DEFAULT_RUNS, MODES, NEIGHBOURING, audit_mechanism
from bngp.cli.common import add_device_arg, add_population_args, add_threads_arg, load_population_and_prior
from bngp.device import resolve_device
from bngp.io_utils import write_json
from bngp.validation import check_output_file
from bngp.defenses.registry import DefenseContext, parse_defense_spec

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``audit-mechanism`` sub-command."""
    parser = subparsers.add_parser(
        "audit-mechanism",
        help=COMMANDS["audit-mechanism"][1],
        description=(
            "Run the allele-frequency release under a defense on audit datasets, attack it and turn the "
            "attack's scores into an empirical lower bound on eps (one-run, many-run) or PANORAMIA's "
            "measurement with generated non-members and its lower bound with real non-members; writes AUDIT.json."
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
        help=(
            "none | laplace:epsilon=E | gaussian:epsilon=E,delta=D | linf:epsilon=E | rr:epsilon=E | "
            "run:RUN_DIR | matched-laplace:run=RUN_DIR ..."
        ),
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
    parser.add_argument("--out", required=True, metavar="AUDIT.json", help="output JSON file")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Load, build the defense, audit, write AUDIT.json atomically, print a one-line summary."""
    start = time.perf_counter()
    device = resolve_device(args.device)
    check_output_file("--out", args.out, parent_must_exist=False)
    population, _ = load_population_and_prior(args.population, args.members)
    defense = parse_defense_spec(args.defense, DefenseContext(population, args.members))
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
    payload["population"] = str(args.population)
    write_json(args.out, payload)
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
        f"delta {result.delta:g}, attack {args.attack}, {time.perf_counter() - start:.1f} s) -> {args.out}"
    )
    return 0
