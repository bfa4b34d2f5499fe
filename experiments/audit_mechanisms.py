"""Audit the release under no defense and under Laplace / Gaussian DP at a few eps.

For every defense SPEC (``none``, ``laplace:epsilon=E``, ``gaussian:epsilon=E,delta=D`` for each
E of ``--eps``), every mode (one-run, many-run, panoramia), every attack of ``--attacks`` and
every seed of ``--seeds``, :func:`bngp.mechanism_audit.audit_mechanism` runs end to end; each row
records the bound next to the claimed eps, whether it exceeds the claim (it never should for a
correct DP mechanism), the attack's AUC on the audit points and the wall time.  Writes the rows
as JSON and a Markdown table.

Usage::

    OMP_NUM_THREADS=1 python experiments/audit_mechanisms.py [--population POP.npz]
        [--members 100] [--canaries 100] [--many-run-canaries 4] [--runs 200]
        [--eps 1,4,16] [--delta 1e-5] [--sensitivity replace] [--attacks score,optimal-lrt]
        [--modes one-run,many-run,panoramia] [--seeds 0,1] --out-dir results/audits

Without ``--population`` a population of 400 individuals x 1,000 independent SNVs (reference
panel of 200) is simulated with seed 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bngp.mechanism_audit import MODES, audit_mechanism
from bngp.data.independent import simulate_independent
from bngp.data.npz import load_population
from bngp.data.population import Population
from bngp.errors import InputError
from bngp.io_utils import write_json, write_text
from bngp.defenses.registry import DefenseContext, parse_defense_spec


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def defense_specs(eps: list[float], delta: float, sensitivity: str) -> list[str]:
    """``none`` then, for each eps, the Laplace and the Gaussian mechanism."""
    specs = ["none"]
    for value in eps:
        specs.append(f"laplace:epsilon={value:g},sensitivity={sensitivity}")
        specs.append(f"gaussian:epsilon={value:g},delta={delta:g},sensitivity={sensitivity}")
    return specs


def _attack_auc(result) -> float | None:
    diagnostics = result.diagnostics
    if "canary_roc" in diagnostics:
        return diagnostics["canary_roc"]["auc"]
    return diagnostics.get("attack_score_auc")


def run(args: argparse.Namespace, population: Population) -> list[dict]:
    rows = []
    for spec in defense_specs(_floats(args.eps), args.delta, args.sensitivity):
        defense = parse_defense_spec(spec, DefenseContext(population, args.members))
        for mode in _names(args.modes):
            if mode not in MODES:
                raise InputError(f"`--modes` must name modes among {', '.join(MODES)}, got {mode!r}.")
            for attack in _names(args.attacks):
                if attack == "optimal-lrt" and defense.noise_law is None:
                    continue
                for seed in (int(value) for value in _names(args.seeds)):
                    start = time.perf_counter()
                    result = audit_mechanism(
                        population,
                        defense,
                        attack,
                        mode=mode,
                        canaries=args.many_run_canaries if mode == "many-run" else args.canaries,
                        members=args.members,
                        runs=args.runs if mode == "many-run" else None,
                        seed=seed,
                    )
                    seconds = time.perf_counter() - start
                    row = {
                        "defense": spec,
                        "mode": mode,
                        "attack": attack,
                        "seed": seed,
                        "epsilon_lb": result.epsilon_lb,
                        "is_lower_bound": result.is_lower_bound,
                        "claimed_epsilon": result.claimed_epsilon,
                        "bound_exceeds_claim": result.exceeds_claim,
                        "attack_auc": _attack_auc(result),
                        "seconds": seconds,
                        "audit": result.to_dict(),
                    }
                    rows.append(row)
                    print(
                        f"{spec:48s} {mode:9s} {attack:12s} seed {seed}: eps_lb {result.epsilon_lb:.3f} "
                        f"(claim {result.claimed_epsilon}) auc {row['attack_auc']:.3f} {seconds:.1f} s",
                        flush=True,
                    )
    return rows


def markdown(rows: list[dict], args: argparse.Namespace, population: Population) -> str:
    lines = [
        "# Mechanism audits: empirical eps bounds vs claimed eps",
        "",
        f"Population: K = {population.n_individuals}, |Q| = {population.n_attributes}, n = {args.members} members; "
        f"canaries {args.canaries} (one-run, panoramia audit-set size), {args.many_run_canaries} x {args.runs} runs "
        f"(many-run); confidence 0.95; DP sensitivity convention `{args.sensitivity}`.",
        "PANORAMIA: eps_lb is the real-non-member companion's lower bound when there is one; eps_tilde "
        "(generated non-members) is a measurement, not a lower bound, and is given in brackets.",
        "",
        "| defense | mode | attack | seed | eps_lb | claimed eps | exceeds claim | attack AUC | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        claimed = "-" if row["claimed_epsilon"] is None else f"{row['claimed_epsilon']:g}"
        exceeds = "-" if row["bound_exceeds_claim"] is None else ("**yes**" if row["bound_exceeds_claim"] else "no")
        bound = f"{row['epsilon_lb']:.3f}" + ("" if row["is_lower_bound"] else " (meas.)")
        generated = (row["audit"].get("panoramia") or {}).get("generated_nonmembers")
        if generated is not None:
            bound += f" [eps_tilde {generated['epsilon_tilde']:.3f}]"
        lines.append(
            f"| `{row['defense']}` | {row['mode']} | {row['attack']} | {row['seed']} | {bound} | {claimed} | "
            f"{exceeds} | {row['attack_auc']:.3f} | {row['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", default=None, metavar="POP.npz")
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--canaries", type=int, default=80)
    parser.add_argument("--many-run-canaries", type=int, default=4)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--eps", default="1,4,16")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--sensitivity", default="replace")
    parser.add_argument("--attacks", default="score,optimal-lrt")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    from bngp.threads import set_threads
    set_threads(1)
    population = (
        load_population(args.population)
        if args.population
        else simulate_independent(400, 200, 1000, seed=0)
    )
    rows = run(args, population)
    out_dir = Path(args.out_dir)
    write_json(out_dir / "audit_mechanisms.json", {"settings": vars(args), "rows": rows})
    write_text(out_dir / "audit_mechanisms.md", markdown(rows, args, population))
    violations = [row for row in rows if row["bound_exceeds_claim"]]
    print(f"{len(rows)} audits, {len(violations)} bounds above the claim -> {out_dir}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
