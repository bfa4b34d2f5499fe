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
score-based many-run methods, the empirical ROC summary), and ``epsilon_kind``: ``"lower
bound"`` (no assumption), ``"lower bound under assumption"`` (``gdp`` and ``fdp-one-run``: the
trade-off curve is Gaussian; bits with ``--family gdp|laplace``) or ``"estimate"`` (PANORAMIA
with generated non-members).  Bad input gives a one-line error and exit code 2 before anything
is written.

The report: next to AUDIT.json (same stem) the command writes AUDIT.md and AUDIT.png, each
atomically (PNG, then Markdown, then JSON).  For scores, AUDIT.json gets ``tradeoff``, the
empirical trade-off curve with its simultaneous region (:mod:`bngp.audit.tradeoff_curve`),
and the PNG shows it (FPR on x, FNR on y) with the eps-delta curve at the certified
``epsilon_lb`` (and the Gaussian curve at ``mu_lb`` for ``gdp``/``fdp-one-run``).  For ``bits``
(no scores) the PNG shows the guesses' (FPR, FNR) and the error-rate upper limit (p_hat, p_hat)
instead.  ``--claim gaussian:mu=M`` or ``--claim eps-delta:epsilon=E,delta=D`` adds the claimed
curve and ``claim``, the verdict: refuted iff the region's conservative corner lies below the
curve (for bits: iff p_hat is below the claim's per-bit error floor).

``--method all`` runs ``clopper-pearson``, ``gdp``, ``one-run`` and ``fdp-one-run`` (searches)
on the same scores at one delta (default 1e-5), each at confidence 1 - beta / 4 (Bonferroni over
the four, so that all rows, and the largest of them, hold together at the stated confidence).
AUDIT.json gets ``methods`` (name -> epsilon_lb, epsilon_kind, confidence, delta, result) and a
top-level ``epsilon_lb``: the largest bound of kind ``"lower bound"``, from
``epsilon_lb_method``.  PANORAMIA (baseline scores or real non-members) and bits (guesses) are
not run by ``all``.
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
    BOUND_KINDS,
    CLAIM_FORMATS,
    FAMILIES,
    INTERVALS,
    bits_audit,
    check_claim,
    check_claim_error_rate,
    empirical_tradeoff,
    eps_delta_tradeoff,
    fdp_one_run_audit,
    fdp_one_run_search,
    gaussian_tradeoff,
    gdp_audit,
    many_run_audit,
    one_run_audit,
    one_run_search,
    panoramia_audit,
    parse_claim,
    roc_summary,
)
from bngp.audit.inputs import check_confidence, check_delta, check_labels, check_scores_and_labels
from bngp.audit.many_run import DEFAULT_STRATEGY
from bngp.audit.results import to_jsonable
from bngp.errors import DataFormatError, InputError
from bngp.io_utils import write_json, write_text
from bngp.report import audit_markdown, plot_tradeoff
from bngp.validation import check_finite_array, check_output_file, check_readable_file

__all__ = ["ALL_METHODS", "METHODS", "INPUT_FORMATS", "add_parser", "read_columns", "read_scores_npz", "run"]

#: the input formats, as --help shows them.
INPUT_FORMATS = """input formats:
  SCORES.csv  a header row, then one row per example; columns by method:
                clopper-pearson, gdp, one-run, fdp-one-run, all: score,member
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

#: audit methods of the command ("all": every method of ALL_METHODS on the same scores).
METHODS = ("clopper-pearson", "one-run", "fdp-one-run", "gdp", "panoramia", "bits", "all")
#: the score-based methods that ``--method all`` runs, in the order of the report's table.
ALL_METHODS = ("clopper-pearson", "gdp", "one-run", "fdp-one-run")

#: default delta per method when ``--delta`` is not given.
_DEFAULT_DELTA = {
    "clopper-pearson": 0.0,
    "one-run": 0.0,
    "fdp-one-run": 1e-5,
    "gdp": 1e-5,
    "panoramia": 0.0,
    "bits": 1e-5,
    "all": 1e-5,
}

#: options that only make sense for some methods: attribute -> (flag, methods).
_METHOD_OPTIONS = {
    "family": ("--family", ("bits",)),
    "interval": ("--interval", ("bits",)),
    "strategy": ("--strategy", ("clopper-pearson", "gdp", "all")),
    "k_plus": ("--k-plus", ("one-run", "fdp-one-run", "all")),
    "k_minus": ("--k-minus", ("one-run", "fdp-one-run", "all")),
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
            "the privacy loss eps and write it to AUDIT.json, with a report next to it: AUDIT.md (every "
            "method's bound, the claim verdict) and AUDIT.png (the empirical trade-off curve with its "
            "confidence region, the claimed and the certified curves)."
        ),
        epilog=INPUT_FORMATS,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("scores", metavar="SCORES", help="SCORES.csv (header row, columns below) or the SCORES.npz of "
                        "`bngp evaluate --scores-out`")
    parser.add_argument("--attack", default=None, metavar="NAME",
                        help="with SCORES.npz: the attack whose scores to audit (default: the only one in the file)")
    parser.add_argument("--method", required=True, choices=METHODS,
                        help="audit method; all: clopper-pearson, gdp, one-run and fdp-one-run on the same scores, "
                             "each at confidence 1 - beta/4, in one table")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence 1 - beta in (0, 1) (default 0.95)")
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="delta of (eps, delta)-DP (default 1e-5 for gdp, fdp-one-run, bits and all, else 0)",
    )
    parser.add_argument("--family", choices=FAMILIES, default=None, help="bits: trade-off family (default eps-delta)")
    parser.add_argument(
        "--interval", choices=INTERVALS, default=None, help="bits: error-rate bound (default clopper-pearson)"
    )
    parser.add_argument(
        "--strategy",
        choices=("auto", "grid", "bonferroni", "split"),
        default=None,
        help=(
            "clopper-pearson/gdp: threshold rule (default auto: a probe of 16 scores per side picks thresholds "
            "at the values of discrete scores, else grid on the rest; grid: joint tests at order statistics "
            "1, 2, 4, ... fixed in advance; bonferroni: every distinct score, Clopper-Pearson limits; "
            "split: choose on half)"
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
    parser.add_argument(
        "--claim",
        default=None,
        metavar="SPEC",
        help=f"a claimed guarantee to test, {CLAIM_FORMATS}: refuted iff the empirical trade-off region "
        "lies below its curve (needs independent runs; bits: iff the error-rate bound is below its floor)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for tie-breaking / the split (default 0)")
    parser.add_argument("--out", required=True, metavar="AUDIT.json",
                        help="output JSON file; AUDIT.md and AUDIT.png are written next to it (same stem)")
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


def _report_paths(out: Path) -> tuple[Path, Path]:
    """AUDIT.md and AUDIT.png next to AUDIT.json, checked like it."""
    if out.suffix.lower() in (".md", ".png"):
        raise InputError(f"`--out` {out} must not end in .md or .png: the report is written next to it.")
    paths = out.with_suffix(".md"), out.with_suffix(".png")
    for path in paths:
        check_output_file("--out", path, parent_must_exist=False)
    return paths


def _scores_and_members(columns: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return check_scores_and_labels(columns["score"], columns["member"], scores_name="score", members_name="member")


def _epsilon_kind(method: str, result: Any) -> str:
    """What ``epsilon_lb`` is, in the labels of :data:`bngp.audit.BOUND_KINDS`."""
    bound, assumed, estimate = BOUND_KINDS
    if hasattr(result, "epsilon_kind"):  # many-run, gdp and fdp-one-run records carry it
        return result.epsilon_kind
    if method == "panoramia":
        return bound if result.is_lower_bound else estimate
    if method == "bits":
        return bound if result.family == "eps-delta" else assumed
    return bound  # one-run (Steinke, Nasr, Jagielski): no assumption


def _detail(method: str, result: Any) -> str:
    """One line on how the method's bound was obtained, for the report's table."""
    if method in ("clopper-pearson", "gdp"):
        counts = (f"{result.decision_rule}: FP {result.false_positives}/{result.n_nonmembers}, "
                  f"FN {result.false_negatives}/{result.n_members}; strategy {result.strategy}")
        return counts if method == "clopper-pearson" else f"mu_lb = {result.mu_lb:.4f} (lower bound); {counts}"
    if method in ("one-run", "fdp-one-run"):
        guesses = (f"k+ = {result.k_plus}, k- = {result.k_minus}: {result.n_correct} of {result.n_guesses} "
                   f"guesses correct ({result.n_canaries} canaries)")
        return guesses if method == "one-run" else f"mu_lb = {result.mu_lb:.4f} (lower bound); {guesses}"
    if method == "panoramia":
        return f"c_lb = {result.c_lb:.4f}, (c+eps)_lb = {result.c_plus_epsilon_lb:.4f}"
    return (f"{result.n_errors} of {result.n_bits} bits wrong, error rate <= {result.error_rate_upper:.4f}; "
            f"family {result.family}")


def _one_run(method: str, scores: np.ndarray, members: np.ndarray, args: argparse.Namespace,
             confidence: float, delta: float) -> Any:
    fixed, search = (one_run_audit, one_run_search) if method == "one-run" else (fdp_one_run_audit, fdp_one_run_search)
    if args.k_plus is None:
        return search(scores, members, confidence=confidence, delta=delta, seed=args.seed)
    plus = _parse_counts("--k-plus", args.k_plus)
    minus = _parse_counts("--k-minus", args.k_minus)
    if len(plus) == 1 and len(minus) == 1:
        return fixed(scores, members, k_plus=plus[0], k_minus=minus[0], confidence=confidence, delta=delta,
                     seed=args.seed)
    pairs = list(itertools.product(plus, minus))
    return search(scores, members, candidates=pairs, confidence=confidence, delta=delta, seed=args.seed)


def _score_method(method: str, scores: np.ndarray, members: np.ndarray, args: argparse.Namespace,
                  confidence: float, delta: float) -> Any:
    """clopper-pearson, gdp, one-run or fdp-one-run on validated scores."""
    if method in ("one-run", "fdp-one-run"):
        return _one_run(method, scores, members, args, confidence, delta)
    audit = gdp_audit if method == "gdp" else many_run_audit
    strategy = args.strategy or DEFAULT_STRATEGY
    return audit(scores, members, confidence=confidence, delta=delta, strategy=strategy, seed=args.seed)


def _audit(args: argparse.Namespace, confidence: float, delta: float) -> tuple[Any, dict[str, Any], int, tuple]:
    """Run the chosen audit (or, for ``all``, every method of :data:`ALL_METHODS`).

    Returns (result, extra payload entries, number of rows, data), where data is
    ``("scores", scores, members)`` or ``("bits", guesses, bits)``; for ``all`` the result is
    the dict method -> result.
    """
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
            confidence=confidence,
            delta=delta,
            family=args.family or "eps-delta",
            interval=args.interval or "clopper-pearson",
        )
        return result, {}, bits.shape[0], ("bits", guesses, bits)
    if method == "panoramia":
        real = bool(args.real_nonmembers)
        names = ("score", "member") if real else ("score", "member", "baseline_score")
        columns = columns_of(names)
        scores, members = _scores_and_members(columns)
        baseline = None if real else check_finite_array("baseline_score", columns["baseline_score"], ndim=1)
        result = panoramia_audit(scores, members, baseline, confidence=confidence, gamma=args.gamma or 0.0)
        return result, {}, scores.shape[0], ("scores", scores, members)
    scores, members = _scores_and_members(columns_of(("score", "member")))
    data = ("scores", scores, members)
    if method == "all":
        each = 1.0 - (1.0 - confidence) / len(ALL_METHODS)
        results = {name: _score_method(name, scores, members, args, each, delta) for name in ALL_METHODS}
        return results, {"roc": roc_summary(scores, members).to_dict()}, scores.shape[0], data
    result = _score_method(method, scores, members, args, confidence, delta)
    extra = {"roc": roc_summary(scores, members).to_dict()} if method in ("clopper-pearson", "gdp") else {}
    return result, extra, scores.shape[0], data


def _row(method: str, result: Any) -> dict[str, Any]:
    return {
        "method": method,
        "epsilon_lb": result.epsilon_lb,
        "epsilon_kind": _epsilon_kind(method, result),
        "confidence": result.confidence,
        "delta": result.delta,
        "detail": _detail(method, result),
    }


#: FPR values at which the claimed and certified trade-off functions are drawn.
_CURVE_X = np.unique(np.concatenate((np.linspace(0.0, 1.0, 501), np.geomspace(1e-6, 1.0, 301))))


def _figure(claim: Any, certified: tuple[str, float, float], results: dict[str, Any],
            data: tuple) -> tuple[list, list]:
    """(curves, points) of the PNG: the claimed and certified curves; for bits, the points."""
    points = []
    if data[0] == "bits":
        guesses, bits = data[1], data[2]
        if 0 < bits.sum() < bits.shape[0]:
            fpr, fnr = float(np.mean(guesses[~bits])), float(np.mean(~guesses[bits]))
            points.append(("guesses: (FPR, FNR) = (P[1 | bit 0], P[0 | bit 1])", fpr, fnr))
        bits_result = results["bits"]
        points.append((f"error-rate upper limit ({bits_result.error_rate_upper:.3f}, same)",
                       bits_result.error_rate_upper, bits_result.error_rate_upper))
    curves = []
    if claim is not None:
        curves.append((f"claim {claim.spec}", _CURVE_X, claim.tradeoff()(_CURVE_X)))
    name, epsilon, delta = certified
    if np.isfinite(epsilon):
        curves.append((f"certified by {name}: (eps = {epsilon:.3f}, delta = {delta:g})-DP curve", _CURVE_X,
                       eps_delta_tradeoff(epsilon, delta)(_CURVE_X)))
    for method in ("gdp", "fdp-one-run"):
        if method in results and np.isfinite(results[method].mu_lb):
            mu = results[method].mu_lb
            curves.append((f"{method}: mu_lb = {mu:.3f} Gaussian curve", _CURVE_X, gaussian_tradeoff(mu)(_CURVE_X)))
    return curves, points


def run(args: argparse.Namespace) -> int:
    """Validate, audit, write AUDIT.png, AUDIT.md and AUDIT.json atomically, print a one-line summary."""
    _check_options(args)
    claim = None if args.claim is None else parse_claim(args.claim, "--claim")
    out = check_output_file("--out", args.out, parent_must_exist=False)
    markdown_path, png_path = _report_paths(out)
    confidence = check_confidence(args.confidence)
    delta = check_delta(_DEFAULT_DELTA[args.method] if args.delta is None else args.delta)
    if args.method == "panoramia" and delta != 0.0:
        raise InputError(
            "`--delta` does not apply to panoramia (a pure-DP measurement); use --gamma for (c, gamma)-closeness."
        )
    if args.method == "all" and delta == 0.0:
        raise InputError("`--delta` must be > 0 with --method all (gdp and fdp-one-run have no finite eps at delta 0).")
    result, extra, rows, data = _audit(args, confidence, delta)
    results = result if args.method == "all" else {args.method: result}
    table = [_row(name, item) for name, item in results.items()]
    notes: list[str] = []
    if args.method == "all":
        valid = [row for row in table if row["epsilon_kind"] == BOUND_KINDS[0]]
        best = max(valid, key=lambda row: row["epsilon_lb"])
        head: dict[str, Any] = {
            "epsilon_lb": best["epsilon_lb"],
            "epsilon_kind": best["epsilon_kind"],
            "epsilon_lb_method": best["method"],
            "confidence": confidence,
            "delta": delta,
            "method_confidence": table[0]["confidence"],
            "union_bound": f"bonferroni over the {len(ALL_METHODS)} methods (each at confidence 1 - beta/{len(ALL_METHODS)})",
            "methods": {
                row["method"]: {key: row[key] for key in ("epsilon_lb", "epsilon_kind", "confidence", "delta")}
                | {"result": results[row["method"]].to_dict()}
                for row in table
            },
        }
        certified = (best["method"], best["epsilon_lb"], delta)
        notes.append(
            f"Each method ran at confidence {table[0]['confidence']:g} = 1 - beta/{len(ALL_METHODS)} (Bonferroni over "
            f"the {len(ALL_METHODS)} methods), so all rows, and the largest of them, hold together at confidence "
            f"{confidence:g}. epsilon_lb is the largest row of kind 'lower bound'; rows of kind 'lower bound under "
            "assumption' (gdp, fdp-one-run) assume a Gaussian trade-off curve and are otherwise estimates."
        )
        notes.append("Not run: panoramia (needs baseline scores or real non-members) and bits (needs guesses).")
    else:
        head = {
            "epsilon_lb": result.epsilon_lb,
            "epsilon_kind": table[0]["epsilon_kind"],
            "confidence": confidence,
            "delta": result.delta,
            "result": result.to_dict(),
        }
        certified = (args.method, result.epsilon_lb, result.delta)
        assumption = getattr(result, "epsilon_assumption", None)
        if assumption and table[0]["epsilon_kind"] != BOUND_KINDS[0]:
            notes.append(f"epsilon_lb assumes: {assumption}.")
        if args.method == "panoramia":
            notes.append(result.interpretation)
    payload: dict[str, Any] = {
        "command": "audit",
        "method": args.method,
        "input": str(args.scores),
        **({"attack": args.attack} if args.attack else {}),
        "rows": rows,
        **head,
        **extra,
    }
    region = None
    if data[0] == "scores":
        curve = empirical_tradeoff(data[1], data[2], confidence=confidence)
        payload["tradeoff"] = curve.to_dict()
        region = {key: getattr(curve, key) for key in
                  ("alpha", "beta", "alpha_upper", "beta_upper", "alpha_lower", "beta_lower", "confidence")}
        if claim is not None:
            payload["claim"] = check_claim(curve, claim).to_dict()
        if args.method in ("one-run", "fdp-one-run", "panoramia"):
            notes.append(
                "The trade-off region and the claim verdict treat every score as an independent run of the "
                "mechanism; for the scores of one run (canaries of one training) or generated non-members they "
                "are descriptive, not a test."
            )
    else:
        if claim is not None:
            payload["claim"] = check_claim_error_rate(claim, result.error_rate_upper, confidence=confidence).to_dict()
        notes.append(
            "The bits audit has no scores, so no trade-off curve: the plot shows the guesses' (FPR, FNR) and the "
            "error-rate upper limit (p_hat, p_hat); a claim f is refuted iff p_hat is below its per-bit error floor "
            "x* = f(x*)."
        )
    if np.isfinite(certified[1]):
        notes.append(
            f"The plot's certified curve is the (eps, delta)-DP trade-off function at eps = epsilon_lb of "
            f"{certified[0]}: at the stated confidence the mechanism is not (eps', delta)-DP for any eps' < "
            "epsilon_lb (for a 'lower bound'; under the stated assumption otherwise)."
        )
    payload["report"] = {"markdown": str(markdown_path), "png": str(png_path)}
    curves, points = _figure(claim, certified, results, data)
    title = f"bngp audit ({args.method}): {Path(str(args.scores)).name}"
    plot_tradeoff(png_path, region=region, curves=curves, points=points, title=title)
    write_text(markdown_path, audit_markdown(payload, table, notes))
    write_json(out, to_jsonable(payload))
    if args.method == "all":
        print(
            f"epsilon_lb = {payload['epsilon_lb']:.4f} ({payload['epsilon_lb_method']}, {payload['epsilon_kind']}; "
            f"best of {len(ALL_METHODS)} methods, confidence {confidence:g}, delta {delta:g}) -> {args.out}, "
            f"{markdown_path}, {png_path}"
        )
    else:
        print(
            f"epsilon_lb = {result.epsilon_lb:.4f} ({result.method}, confidence {confidence:g}, "
            f"delta {result.delta:g}) -> {args.out}, {markdown_path}, {png_path}"
        )
    if claim is not None:
        check = payload["claim"]
        verdict = "refuted" if check["refuted"] else "not refuted"
        print(f"claim {check['claim']}: {verdict} at confidence {check['confidence']:g} (at FPR <= "
              f"{check['alpha']:.4g}: FNR <= {check['beta_upper']:.4g}, claimed >= {check['claimed_beta']:.4g})")
    return 0
