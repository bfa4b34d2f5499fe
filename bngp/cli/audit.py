"""``bngp audit SCORES.csv --method M --out AUDIT.json``: empirical lower bound on eps.

The CSV has a header row.  Columns read per method:

* ``clopper-pearson``, ``gdp``, ``one-run``: ``score,member`` (member = 1, higher = member);
* ``panoramia``: ``score,member,baseline_score`` (MIA score, label, baseline score), or only
  ``score,member`` with ``--real-nonmembers``;
* ``bits``: ``guess,bit``.

AUDIT.json always has ``epsilon_lb`` plus the full result record of the method (and, for
score-based many-run methods, the empirical ROC summary).  Bad input gives a one-line error
and exit code 2 before anything is written.
"""

from __future__ import annotations

import argparse
import csv
import itertools
from pathlib import Path
from typing import Any

import numpy as np

from bngp.audit import (
    FAMILIES,
    INTERVALS,
    bits_audit,
    gdp_audit,
    many_run_audit,
    one_run_audit,
    one_run_search,
    panoramia_audit,
    roc_summary,
)
from bngp.audit.inputs import check_confidence, check_delta, check_labels, check_scores_and_labels
from bngp.audit.results import to_jsonable
from bngp.errors import DataFormatError, InputError
from bngp.io_utils import write_json
from bngp.validation import check_finite_array, check_readable_file

__all__ = ["METHODS", "add_parser", "read_columns", "run"]

#: audit methods of the command.
METHODS = ("clopper-pearson", "one-run", "gdp", "panoramia", "bits")

#: default delta per method when ``--delta`` is not given.
_DEFAULT_DELTA = {"clopper-pearson": 0.0, "one-run": 0.0, "gdp": 1e-5, "panoramia": 0.0, "bits": 1e-5}

#: options that only make sense for some methods: attribute -> (flag, methods).
_METHOD_OPTIONS = {
    "family": ("--family", ("bits",)),
    "interval": ("--interval", ("bits",)),
    "strategy": ("--strategy", ("clopper-pearson", "gdp")),
    "k_plus": ("--k-plus", ("one-run",)),
    "k_minus": ("--k-minus", ("one-run",)),
    "gamma": ("--gamma", ("panoramia",)),
    "real_nonmembers": ("--real-nonmembers", ("panoramia",)),
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``audit`` sub-command."""
    parser = subparsers.add_parser(
        "audit",
        help="empirical lower bound on eps from attack scores",
        description=(
            "Turn membership scores (or bit guesses) into a statistically valid lower bound on "
            "the privacy loss eps and write it to AUDIT.json."
        ),
    )
    parser.add_argument("scores", metavar="SCORES.csv", help="CSV with a header row (columns depend on --method)")
    parser.add_argument("--method", required=True, choices=METHODS, help="audit method")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence 1 - beta in (0, 1) (default 0.95)")
    parser.add_argument(
        "--delta", type=float, default=None, help="delta of (eps, delta)-DP (default 1e-5 for gdp and bits, else 0)"
    )
    parser.add_argument("--family", choices=FAMILIES, default=None, help="bits: trade-off family (default eps-delta)")
    parser.add_argument(
        "--interval", choices=INTERVALS, default=None, help="bits: error-rate bound (default clopper-pearson)"
    )
    parser.add_argument(
        "--strategy",
        choices=("bonferroni", "split"),
        default=None,
        help="clopper-pearson/gdp: threshold choice (default bonferroni)",
    )
    parser.add_argument("--k-plus", default=None, help="one-run: number(s) of 'in' guesses, e.g. 100 or 50,100")
    parser.add_argument("--k-minus", default=None, help="one-run: number(s) of 'out' guesses")
    parser.add_argument("--gamma", type=float, default=None, help="panoramia: (c, gamma)-closeness slack (default 0)")
    parser.add_argument(
        "--real-nonmembers",
        action="store_true",
        default=None,
        help="panoramia: non-members are real held-out points (c = 0; no baseline_score needed)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for tie-breaking / the split (default 0)")
    parser.add_argument("--out", required=True, metavar="AUDIT.json", help="output JSON file")
    parser.set_defaults(func=run)
    return parser


def read_columns(path: str | Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Read the named numeric columns of a CSV file with a header row.

    Blank lines are skipped; a missing column, a missing cell or a non-numeric cell raises
    :class:`DataFormatError` naming the line.  ``nan`` parses (and is rejected later).
    """
    path = check_readable_file("SCORES.csv", path)
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise DataFormatError(f"{path}: the file is empty (expected a header row with {','.join(names)}).")
        header = [name.strip() for name in header]
        missing = [name for name in names if name not in header]
        if missing:
            raise DataFormatError(f"{path}: missing column(s) {', '.join(missing)} (found: {', '.join(header)}).")
        positions = [header.index(name) for name in names]
        values: dict[str, list[float]] = {name: [] for name in names}
        for line, row in enumerate(reader, start=2):
            if not any(cell.strip() for cell in row):
                continue
            for name, position in zip(names, positions):
                text = row[position].strip() if position < len(row) else ""
                try:
                    values[name].append(float(text))
                except ValueError:
                    raise DataFormatError(f"{path} line {line}: `{name}` must be a number, got {text!r}.") from None
    if not values[names[0]]:
        raise DataFormatError(f"{path}: no data rows.")
    return {name: np.asarray(column, dtype=np.float64) for name, column in values.items()}


def _parse_counts(flag: str, text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise InputError(f"`{flag}` must be an integer or a comma-separated list of integers, got {text!r}.") from None
    return counts


def _check_options(args: argparse.Namespace) -> None:
    for attribute, (flag, methods) in _METHOD_OPTIONS.items():
        if getattr(args, attribute) is not None and args.method not in methods:
            raise InputError(f"`{flag}` applies only to --method {' or '.join(methods)}.")
    if (args.k_plus is None) != (args.k_minus is None):
        raise InputError("`--k-plus` and `--k-minus` must be given together.")


def _scores_and_members(columns: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return check_scores_and_labels(columns["score"], columns["member"], scores_name="score", members_name="member")


def _audit(args: argparse.Namespace, delta: float) -> tuple[Any, dict[str, Any], int]:
    """Run the chosen audit; returns (result, extra payload entries, number of rows)."""
    method = args.method
    if method == "bits":
        columns = read_columns(args.scores, ("guess", "bit"))
        bits = check_labels("bit", columns["bit"])
        guesses = check_labels("guess", columns["guess"], length=bits.shape[0])
        result = bits_audit(
            guesses,
            bits,
            confidence=args.confidence,
            delta=delta,
            family=args.family or "eps-delta",
            interval=args.interval or "clopper-pearson",
        )
        return result, {}, bits.shape[0]
    if method == "panoramia":
        real = bool(args.real_nonmembers)
        names = ("score", "member") if real else ("score", "member", "baseline_score")
        columns = read_columns(args.scores, names)
        scores, members = _scores_and_members(columns)
        baseline = None if real else check_finite_array("baseline_score", columns["baseline_score"], ndim=1)
        result = panoramia_audit(scores, members, baseline, confidence=args.confidence, gamma=args.gamma or 0.0)
        return result, {}, scores.shape[0]
    columns = read_columns(args.scores, ("score", "member"))
    scores, members = _scores_and_members(columns)
    if method == "one-run":
        if args.k_plus is None:
            result = one_run_search(scores, members, confidence=args.confidence, delta=delta, seed=args.seed)
        else:
            plus = _parse_counts("--k-plus", args.k_plus)
            minus = _parse_counts("--k-minus", args.k_minus)
            if len(plus) == 1 and len(minus) == 1:
                result = one_run_audit(
                    scores,
                    members,
                    k_plus=plus[0],
                    k_minus=minus[0],
                    confidence=args.confidence,
                    delta=delta,
                    seed=args.seed,
                )
            else:
                pairs = list(itertools.product(plus, minus))
                result = one_run_search(
                    scores, members, candidates=pairs, confidence=args.confidence, delta=delta, seed=args.seed
                )
        return result, {}, scores.shape[0]
    audit = gdp_audit if method == "gdp" else many_run_audit
    result = audit(
        scores, members, confidence=args.confidence, delta=delta, strategy=args.strategy or "bonferroni", seed=args.seed
    )
    return result, {"roc": roc_summary(scores, members).to_dict()}, scores.shape[0]


def run(args: argparse.Namespace) -> int:
    """Validate, audit, write AUDIT.json atomically and print a one-line summary."""
    _check_options(args)
    confidence = check_confidence(args.confidence)
    delta = check_delta(_DEFAULT_DELTA[args.method] if args.delta is None else args.delta)
    if args.method == "panoramia" and delta != 0.0:
        raise InputError(
            "`--delta` does not apply to panoramia (a pure-DP measurement); use --gamma for (c, gamma)-closeness."
        )
    result, extra, rows = _audit(args, delta)
    payload: dict[str, Any] = {
        "command": "audit",
        "method": args.method,
        "input": str(args.scores),
        "rows": rows,
        "epsilon_lb": result.epsilon_lb,
        "confidence": confidence,
        "delta": result.delta,
        "result": result.to_dict(),
        **extra,
    }
    write_json(args.out, to_jsonable(payload))
    print(
        f"epsilon_lb = {result.epsilon_lb:.4f} ({result.method}, confidence {confidence:g}, "
        f"delta {result.delta:g}) -> {args.out}"
    )
    return 0
