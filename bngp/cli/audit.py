"""``bngp audit SCORES.csv|SCORES.npz --method M --out AUDIT.json``: empirical lower bound on eps.

SCORES.npz is the file ``bngp evaluate --scores-out`` writes (``labels`` and one
``NAME_scores`` array per attack, releases x individuals); ``--attack NAME`` picks the attack
(needed when the file holds several), and its scores and labels over every release and
individual become the ``score`` and ``member`` columns.

A CSV has a header row.  Columns read per method:

* ``clopper-pearson``, ``gdp``, ``one-run``, ``fdp-one-run``: ``score,member`` (member = 1,
  higher = member);
* ``panoramia``: ``score,member,baseline_score`` (MIA score, label, baseline score), or only
  ``score,member`` with ``--real-nonmembers``;
* ``bits``: ``guess,bit``.

AUDIT.json always has ``epsilon_lb`` plus the full result record of the method (and, for
score-based many-run methods, the empirical ROC summary).  For ``clopper-pearson`` and ``gdp``
it also has ``epsilon_kind``: ``"lower bound"`` (no assumption) or, for ``gdp``, ``"lower
bound under assumption"`` (the trade-off curve is Gaussian; otherwise an estimate).  Bad
input gives a one-line error and exit code 2 before anything is written.
"""

from __future__ import annotations

import argparse
import csv
import itertools
from pathlib import Path
from typing import Any

import numpy as np

from bngp.cli import COMMANDS, HelpFormatter
from bngp.audit import (
    FAMILIES,
    INTERVALS,
    bits_audit,
    fdp_one_run_audit,
    fdp_one_run_search,
    gdp_audit,
    many_run_audit,
    one_run_audit,
    one_run_search,
    panoramia_audit,
    roc_summary,
)
from bngp.audit.inputs import check_confidence, check_delta, check_labels, check_scores_and_labels
from bngp.audit.many_run import DEFAULT_STRATEGY
from bngp.audit.results import to_jsonable
from bngp.errors import DataFormatError, InputError
from bngp.io_utils import write_json
from bngp.validation import check_finite_array, check_output_file, check_readable_file

__all__ = ["METHODS", "INPUT_FORMATS", "add_parser", "read_columns", "read_scores_npz", "run"]

#: the input formats, as --help shows them.
INPUT_FORMATS = """input formats:
  SCORES.csv  a header row, then one row per example; columns by method:
                clopper-pearson, gdp, one-run, fdp-one-run: score,member
                panoramia: score,member,baseline_score (or score,member with --real-nonmembers)
                bits: guess,bit
              member = 1 for members, 0 otherwise; higher score = more likely member.
              Example:
                score,member
                0.93,1
                -0.20,0
  SCORES.npz  the file `bngp evaluate --scores-out SCORES.npz` writes: `labels` and
              `NAME_scores` (releases x individuals) per attack; --attack NAME picks one.
              Every (release, individual) pair is one example: score = the attack's
              score, member = the label.  Not for --method bits."""

#: audit methods of the command.
METHODS = ("clopper-pearson", "one-run", "fdp-one-run", "gdp", "panoramia", "bits")

#: default delta per method when ``--delta`` is not given.
_DEFAULT_DELTA = {
    "clopper-pearson": 0.0,
    "one-run": 0.0,
    "fdp-one-run": 1e-5,
    "gdp": 1e-5,
    "panoramia": 0.0,
    "bits": 1e-5,
}

#: options that only make sense for some methods: attribute -> (flag, methods).
_METHOD_OPTIONS = {
    "family": ("--family", ("bits",)),
    "interval": ("--interval", ("bits",)),
    "strategy": ("--strategy", ("clopper-pearson", "gdp")),
    "k_plus": ("--k-plus", ("one-run", "fdp-one-run")),
    "k_minus": ("--k-minus", ("one-run", "fdp-one-run")),
    "gamma": ("--gamma", ("panoramia",)),
    "real_nonmembers": ("--real-nonmembers", ("panoramia",)),
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``audit`` sub-command."""
    parser = subparsers.add_parser(
        "audit",
        help=COMMANDS["audit"][1],
        description=(
            "Turn membership scores (or bit guesses) into a statistically valid lower bound on "
            "the privacy loss eps and write it to AUDIT.json."
        ),
        epilog=INPUT_FORMATS,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("scores", metavar="SCORES", help="SCORES.csv (header row, columns below) or the SCORES.npz of "
                        "`bngp evaluate --scores-out`")
    parser.add_argument("--attack", default=None, metavar="NAME",
                        help="with SCORES.npz: the attack whose scores to audit (default: the only one in the file)")
    parser.add_argument("--method", required=True, choices=METHODS, help="audit method")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence 1 - beta in (0, 1) (default 0.95)")
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="delta of (eps, delta)-DP (default 1e-5 for gdp, fdp-one-run and bits, else 0)",
    )
    parser.add_argument("--family", choices=FAMILIES, default=None, help="bits: trade-off family (default eps-delta)")
    parser.add_argument(
        "--interval", choices=INTERVALS, default=None, help="bits: error-rate bound (default clopper-pearson)"
    )
    parser.add_argument(
        "--strategy",
        choices=("grid", "bonferroni", "split"),
        default=None,
        help=(
            "clopper-pearson/gdp: threshold rule (default grid: joint tests at order statistics 1, 2, 4, ... "
            "fixed in advance; bonferroni: every distinct score, Clopper-Pearson limits; split: choose on half)"
        ),
    )
    parser.add_argument(
        "--k-plus", default=None, help="one-run, fdp-one-run: number(s) of 'in' guesses, e.g. 100 or 50,100"
    )
    parser.add_argument("--k-minus", default=None, help="one-run, fdp-one-run: number(s) of 'out' guesses")
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


def read_scores_npz(path: str | Path, attack: str | None) -> dict[str, np.ndarray]:
    """``score`` and ``member`` columns from the SCORES.npz of ``bngp evaluate --scores-out``."""
    path = check_readable_file("SCORES", path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except Exception as exc:  # zipfile/numpy raise several types for corrupt files
        raise DataFormatError(f"{path} is not a readable .npz file ({type(exc).__name__}).") from exc
    names = sorted(key[: -len("_scores")] for key in arrays if key.endswith("_scores"))
    if "labels" not in arrays or not names:
        raise DataFormatError(f"{path} is not a scores file of `bngp evaluate --scores-out` (needs labels and NAME_scores).")
    if attack is None:
        if len(names) > 1:
            raise InputError(f"{path} holds the scores of several attacks ({', '.join(names)}): choose one with --attack.")
        attack = names[0]
    if attack not in names:
        raise InputError(f"{path} has no scores of attack {attack!r} (it has: {', '.join(names)}).")
    scores, labels = arrays[f"{attack}_scores"], arrays["labels"]
    if scores.shape != labels.shape:
        raise DataFormatError(f"{path}: `{attack}_scores` {scores.shape} and `labels` {labels.shape} differ in shape.")
    return {"score": scores.astype(np.float64).ravel(), "member": labels.astype(np.float64).ravel()}


def _is_npz(path: str | Path) -> bool:
    """True for a zip archive (what numpy's savez writes), whatever the file is called."""
    path = check_readable_file("SCORES", path)
    with path.open("rb") as handle:
        return handle.read(4) == b"PK\x03\x04"


def read_columns(path: str | Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Read the named numeric columns of a CSV file with a header row.

    Blank lines are skipped; a missing column, a missing cell or a non-numeric cell raises
    :class:`DataFormatError` naming the line.  ``nan`` parses (and is rejected later).
    """
    path = check_readable_file("SCORES.csv", path)
    try:
        return _read_csv(path, names)
    except UnicodeDecodeError:
        raise DataFormatError(f"{path} is not a CSV text file (see `bngp audit --help` for the formats).") from None


def _read_csv(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
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
    from_npz = _is_npz(args.scores)
    if from_npz and (method == "bits" or (method == "panoramia" and not args.real_nonmembers)):
        raise InputError("a SCORES.npz holds scores and memberships only: use a CSV for --method bits and for "
                         "panoramia without --real-nonmembers.")
    if args.attack is not None and not from_npz:
        raise InputError("`--attack` applies only to a SCORES.npz of `bngp evaluate --scores-out`.")

    def columns_of(names: tuple[str, ...]) -> dict[str, np.ndarray]:
        return read_scores_npz(args.scores, args.attack) if from_npz else read_columns(args.scores, names)

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
        columns = columns_of(names)
        scores, members = _scores_and_members(columns)
        baseline = None if real else check_finite_array("baseline_score", columns["baseline_score"], ndim=1)
        result = panoramia_audit(scores, members, baseline, confidence=args.confidence, gamma=args.gamma or 0.0)
        return result, {}, scores.shape[0]
    columns = columns_of(("score", "member"))
    scores, members = _scores_and_members(columns)
    if method in ("one-run", "fdp-one-run"):
        fixed, search = (
            (one_run_audit, one_run_search) if method == "one-run" else (fdp_one_run_audit, fdp_one_run_search)
        )
        if args.k_plus is None:
            result = search(scores, members, confidence=args.confidence, delta=delta, seed=args.seed)
        else:
            plus = _parse_counts("--k-plus", args.k_plus)
            minus = _parse_counts("--k-minus", args.k_minus)
            if len(plus) == 1 and len(minus) == 1:
                result = fixed(
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
                result = search(
                    scores, members, candidates=pairs, confidence=args.confidence, delta=delta, seed=args.seed
                )
        return result, {}, scores.shape[0]
    audit = gdp_audit if method == "gdp" else many_run_audit
    strategy = args.strategy or DEFAULT_STRATEGY
    result = audit(scores, members, confidence=args.confidence, delta=delta, strategy=strategy, seed=args.seed)
    return result, {"roc": roc_summary(scores, members).to_dict()}, scores.shape[0]


def run(args: argparse.Namespace) -> int:
    """Validate, audit, write AUDIT.json atomically and print a one-line summary."""
    _check_options(args)
    check_output_file("--out", args.out, parent_must_exist=False)
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
        **({"attack": args.attack} if args.attack else {}),
        "rows": rows,
        "epsilon_lb": result.epsilon_lb,
        **({"epsilon_kind": result.epsilon_kind} if hasattr(result, "epsilon_kind") else {}),
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
