"""``bngp audit SCORES.csv|SCORES.npz --method M --out AUDIT.json``: empirical lower bound on eps.

A CSV has a header row.  Columns read per method:

* ``clopper-pearson``, ``gdp``, ``one-run``, ``fdp-one-run``: ``score,member`` (member = 1,
  higher = member);
* ``panoramia``: ``score,member,baseline_score`` (MIA score, label, baseline score), or only
  ``score,member`` with ``--real-nonmembers``;
* ``bits``: ``guess,bit``.

The rows must be what the method assumes: independent runs of the mechanism, each with or
without the target (``clopper-pearson``, ``gdp``), or the canaries (audit points) of one run,
each included by an independent fair coin (``one-run``, ``fdp-one-run``, ``panoramia``).

SCORES.npz is the file ``bngp evaluate --scores-out`` writes (``labels`` and one
``NAME_scores`` array per attack, R releases x K targets); ``--attack NAME`` picks the attack
(needed when the file holds several).  Its R K pairs are not independent runs (the scores of one
release share its noise and its dataset), so they are audited per target
(:mod:`bngp.audit.per_target`): each target's R scores, one per release, are a many-run audit,
and the bound is the largest over the targets, Bonferroni over them.  Only ``clopper-pearson`` and
``gdp`` apply; the one-run methods, PANORAMIA and ``all`` (which includes the one-run methods) are
refused with the reason, since evaluate draws each release's members jointly (n of K), not by an
independent fair coin per canary: ``bngp audit-mechanism`` runs those designs.

AUDIT.json (``format`` :data:`AUDIT_FORMAT`) always has ``epsilon_lb`` plus the full result record
of the method (and, for score-based many-run methods, the empirical ROC summary), ``runs`` (what
the rows are assumed to be), and ``epsilon_kind``: ``"lower bound"`` (no assumption), ``"lower
bound under assumption"`` (``gdp`` and ``fdp-one-run``: the trade-off curve is Gaussian; bits with
``--family gdp|laplace``) or ``"estimate"`` (PANORAMIA with generated non-members).  Next to the
bound: ``epsilon_ceiling``, the largest eps the design can certify, the same method's bound on a
perfect attack's scores (:mod:`bngp.audit.ceiling`), its ``ceiling_state`` and ``reading``; with
``--claim``, ``claimed_epsilon`` (the claim's eps at the audit's delta) and ``claim_verdict``
(refuted iff an assumption-free epsilon_lb exceeds it).  Bad input gives a one-line error and exit
code 2 before anything is written.

The report: next to AUDIT.json (same stem) the command writes AUDIT.md and AUDIT.png, each
atomically (PNG, then Markdown, then JSON).  For scores, AUDIT.json gets ``tradeoff``, the
empirical trade-off curve with its simultaneous region (:mod:`bngp.audit.tradeoff_curve`; for a
SCORES.npz, of the best target's scores at that target's confidence 1 - beta / K'), and the PNG
shows it (FPR on x, FNR on y) with the eps-delta curve at the certified ``epsilon_lb`` (and the
Gaussian curve at ``mu_lb`` for ``gdp``/``fdp-one-run``).  For ``bits`` (no scores) the PNG shows
the guesses' (FPR, FNR) and the error-rate upper limit (p_hat, p_hat) instead.  ``--claim
gaussian:mu=M`` or ``--claim eps-delta:epsilon=E,delta=D`` adds the claimed curve and ``claim``,
the trade-off verdict: refuted iff the region's conservative corner lies below the curve (for
bits: iff p_hat is below the claim's per-bit error floor).

``--method all`` runs ``clopper-pearson``, ``gdp``, ``one-run`` and ``fdp-one-run`` (searches)
on the same scores at one delta (default 1e-5), each at confidence 1 - beta / 4 (Bonferroni over
the four, so that all rows, and the largest of them, hold together at the stated confidence).
AUDIT.json gets ``methods`` (name -> epsilon_lb, epsilon_kind, confidence, delta, the ceiling
and claim fields, result) and a top-level ``epsilon_lb``: the largest bound of kind ``"lower
bound"``, from ``epsilon_lb_method``, read against the largest ceiling of those rows.  PANORAMIA
(baseline scores or real non-members) and bits (guesses) are not run by ``all``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bngp.cli import COMMANDS, HelpFormatter
from bngp.audit import (
    BOUND_KINDS,
    CLAIM_FORMATS,
    FAMILIES,
    INTERVALS,
    PER_TARGET_METHODS,
    BoundReading,
    Claim,
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
    per_target_audit,
    perfect_scores,
    read_bound,
    roc_summary,
)
from bngp.audit.inputs import check_confidence, check_delta, check_labels, check_scores_and_labels
from bngp.audit.many_run import DEFAULT_STRATEGY
from bngp.audit.results import to_jsonable
from bngp.errors import DataFormatError, InputError
from bngp.io_utils import write_json, write_text
from bngp.report import audit_markdown, plot_tradeoff
from bngp.outputs import add_force_arg, claim_report_outputs
from bngp.validation import check_finite_array, check_readable_file

__all__ = ["ALL_METHODS", "AUDIT_FORMAT", "METHODS", "INPUT_FORMATS", "add_parser", "read_columns", "read_scores_npz",
           "run"]

#: the ``format`` of AUDIT.json; the number is its version.
AUDIT_FORMAT = "bngp-audit-1"

#: the input formats, as --help shows them.
INPUT_FORMATS = """input formats:
  SCORES.csv  a header row, then one row per example; columns by method:
                clopper-pearson, gdp, one-run, fdp-one-run, all: score,member
                panoramia: score,member,baseline_score (or score,member with --real-nonmembers)
                bits: guess,bit
              member = 1 for members, 0 otherwise; higher score = more likely member.
              Rows are independent runs (clopper-pearson, gdp) or the canaries of one run,
              each included by an independent fair coin (one-run, fdp-one-run, panoramia).
              Example:
                score,member
                0.93,1
                -0.20,0
  SCORES.npz  the file `bngp evaluate --scores-out SCORES.npz` writes: `labels` and
              `NAME_scores` (releases x targets) per attack; --attack NAME picks one.
              These are not independent runs (one release's scores share its noise and
              dataset), so they are audited per target: each target's scores, one per
              release, are one many-run audit, and the bound is the best target's,
              Bonferroni over the targets.  Only clopper-pearson and gdp."""

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

#: what the rows of the input are taken to be, per method (AUDIT.json ``runs``).
_RUNS = {
    "clopper-pearson": "every row is one independent run of the mechanism, with or without the target",
    "gdp": "every row is one independent run of the mechanism, with or without the target",
    "one-run": "every row is a canary of one run, included by an independent fair coin",
    "fdp-one-run": "every row is a canary of one run, included by an independent fair coin",
    "panoramia": "every row is an audit point of one run, a member by an independent fair coin",
    "bits": "every row is one transmitted bit and its guess",
    "all": ("every row is one independent run with or without the target (clopper-pearson, gdp) and a canary of "
            "one run included by an independent fair coin (one-run, fdp-one-run); a row holds only for the methods "
            "whose assumption it meets"),
}

#: how to enlarge each design, for the notes on its ceiling.
_ADVICE = {
    "clopper-pearson": "more runs: the ceiling grows about ln 2 = 0.69 per doubling",
    "gdp": "more runs",
    "one-run": "more canaries: the ceiling grows about ln 2 = 0.69 per doubling of the guesses",
    "fdp-one-run": "more canaries",
    "panoramia": "a larger audit set",
    "bits": "more bits",
    "per-target": ("more releases, `bngp evaluate --releases`: the ceiling grows about ln 2 = 0.69 per doubling; "
                   "or a canary audit, `bngp audit-mechanism`"),
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``audit`` sub-command."""
    parser = subparsers.add_parser(
        "audit",
        help=COMMANDS["audit"][1],
        description=(
            "Turn membership scores (or bit guesses) into a statistically valid lower bound on "
            "the privacy loss eps and write it to AUDIT.json, with a report next to it: AUDIT.md (every "
            "method's bound next to the largest eps its design can certify, a claimed eps and the verdict) and "
            "AUDIT.png (the empirical trade-off curve with its confidence region, the claimed and the certified "
            "curves)."
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
        help=f"a claimed guarantee, {CLAIM_FORMATS}: its eps at the audit's delta is put beside epsilon_lb "
        "(refuted iff epsilon_lb, an assumption-free lower bound, exceeds it), and its trade-off curve is tested "
        "against the empirical region (bits: against the error-rate bound)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for tie-breaking / the split (default 0)")
    parser.add_argument("--out", required=True, metavar="AUDIT.json",
                        help="output JSON file; AUDIT.md and AUDIT.png are written next to it (same stem)")
    add_force_arg(parser, "AUDIT.json, AUDIT.md and AUDIT.png")
    parser.set_defaults(func=run)
    return parser


def read_scores_npz(path: str | Path, attack: str | None) -> dict[str, np.ndarray]:
    """``score`` and ``member`` arrays, R releases x K targets, from the SCORES.npz of
    ``bngp evaluate --scores-out``."""
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
    if scores.ndim != 2:
        raise DataFormatError(f"{path}: `{attack}_scores` must be releases x targets (2-D), got shape {scores.shape}.")
    return {"score": scores.astype(np.float64), "member": labels.astype(np.float64)}


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


def _epsilon_kind(method: str, result: Any) -> str:
    """What ``epsilon_lb`` is, in the labels of :data:`bngp.audit.BOUND_KINDS`."""
    bound, assumed, estimate = BOUND_KINDS
    if hasattr(result, "epsilon_kind"):  # many-run, gdp, fdp-one-run and per-target records carry it
        return result.epsilon_kind
    if method == "panoramia":
        return bound if result.is_lower_bound else estimate
    if method == "bits":
        return bound if result.family == "eps-delta" else assumed
    return bound  # one-run (Steinke, Nasr, Jagielski): no assumption


def _many_run_counts(result: dict[str, Any] | Any) -> str:
    record = result if isinstance(result, dict) else result.to_dict()
    return (f"{record['decision_rule']}: FP {record['false_positives']}/{record['n_nonmembers']}, "
            f"FN {record['false_negatives']}/{record['n_members']}; strategy {record['strategy']}")


def _detail(method: str, result: Any) -> str:
    """One line on how the method's bound was obtained, for the report's table."""
    if hasattr(result, "per_target_method"):
        mu = "" if result.mu_lb is None else f"mu_lb = {result.mu_lb:.4f} (lower bound); "
        return (f"{mu}per target over {result.n_releases} releases: best target {result.best_target} of "
                f"{result.targets_audited}, {_many_run_counts(result.best)}; {result.union_bound}")
    if method in ("clopper-pearson", "gdp"):
        counts = _many_run_counts(result)
        return counts if method == "clopper-pearson" else f"mu_lb = {result.mu_lb:.4f} (lower bound); {counts}"
    if method in ("one-run", "fdp-one-run"):
        guesses = (f"k+ = {result.k_plus}, k- = {result.k_minus}: {result.n_correct} of {result.n_guesses} "
                   f"guesses correct ({result.n_canaries} canaries)")
        return guesses if method == "one-run" else f"mu_lb = {result.mu_lb:.4f} (lower bound); {guesses}"
    if method == "panoramia":
        return f"c_lb = {result.c_lb:.4f}, (c+eps)_lb = {result.c_plus_epsilon_lb:.4f}"
    return (f"{result.n_errors} of {result.n_bits} bits wrong, error rate <= {result.error_rate_upper:.4f}; "
            f"family {result.family}")


def _design(method: str, result: Any) -> tuple[str, str]:
    """(the design in words, how to enlarge it) for the sentences on the ceiling."""
    if hasattr(result, "per_target_method"):
        return (f"{result.n_releases} releases of {result.targets_audited} targets, one score per release and "
                "target"), _ADVICE["per-target"]
    if method in ("clopper-pearson", "gdp"):
        return f"{result.n_nonmembers} non-member and {result.n_members} member runs", _ADVICE[method]
    if method in ("one-run", "fdp-one-run"):
        return f"{result.n_canaries} canaries", _ADVICE[method]
    if method == "panoramia":
        return f"an audit set of {result.n_audit}", _ADVICE[method]
    return f"{result.n_bits} bits", _ADVICE[method]


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


@dataclass(frozen=True)
class _Outcome:
    """What the audit produced: per method its result and the design's ceiling (the same method's
    epsilon_lb on a perfect attack's scores, :mod:`bngp.audit.ceiling`), the extra payload entries,
    the input's row count and what a row is, and the data: ``("scores", scores, members)``,
    ``("bits", guesses, bits)`` or, for a SCORES.npz, ``("targets", scores, labels)`` (R x K)."""

    results: dict[str, Any]
    ceilings: dict[str, float]
    extra: dict[str, Any]
    rows: int
    runs: str
    data: tuple


def _npz_refusal(path: str, method: str) -> str:
    return (f"{path} holds `bngp evaluate` scores (releases x targets), which are not independent runs: each release "
            f"draws its members jointly, not by an independent fair coin per canary, so --method {method} does not "
            "apply to them; use --method clopper-pearson or gdp (audited per target, one score per release) or a "
            "canary audit, `bngp audit-mechanism --mode one-run|many-run|panoramia`.")


def _audit(args: argparse.Namespace, confidence: float, delta: float) -> _Outcome:
    """Run the chosen audit (or, for ``all``, every method of :data:`ALL_METHODS`) and its ceiling."""
    method = args.method
    from_npz = _is_npz(args.scores)
    if from_npz and method not in PER_TARGET_METHODS:
        raise InputError(_npz_refusal(args.scores, method))
    if args.attack is not None and not from_npz:
        raise InputError("`--attack` applies only to a SCORES.npz of `bngp evaluate --scores-out`.")
    if from_npz:
        columns = read_scores_npz(args.scores, args.attack)
        scores, labels = columns["score"], columns["member"]
        strategy = args.strategy or DEFAULT_STRATEGY

        def per_target(values: np.ndarray) -> Any:
            return per_target_audit(values, labels, method=method, confidence=confidence, delta=delta,
                                    strategy=strategy, seed=args.seed)

        result = per_target(scores)
        pooled = roc_summary(scores.ravel(), labels.ravel()).to_dict()
        runs = (f"{scores.shape[0]} releases x {scores.shape[1]} targets of `bngp evaluate`, not independent runs: "
                "each target's scores, one per release, are independent runs of that target (bngp.audit.per_target), "
                "the bound is the best target's, Bonferroni over the targets")
        return _Outcome({method: result}, {method: per_target(perfect_scores(labels)).epsilon_lb}, {"roc": pooled},
                        scores.size, runs, ("targets", scores, labels))
    if method == "bits":
        columns = read_columns(args.scores, ("guess", "bit"))
        bits = check_labels("bit", columns["bit"])
        guesses = check_labels("guess", columns["guess"], length=bits.shape[0])

        def bits_bound(values: np.ndarray) -> Any:
            return bits_audit(values, bits, confidence=confidence, delta=delta, family=args.family or "eps-delta",
                              interval=args.interval or "clopper-pearson")

        return _Outcome({method: bits_bound(guesses)}, {method: bits_bound(bits).epsilon_lb}, {}, bits.shape[0],
                        _RUNS[method], ("bits", guesses, bits))
    if method == "panoramia":
        real = bool(args.real_nonmembers)
        columns = read_columns(args.scores, ("score", "member") if real else ("score", "member", "baseline_score"))
        scores, members = _scores_and_members(columns)
        baseline = None if real else check_finite_array("baseline_score", columns["baseline_score"], ndim=1)

        def panoramia(values: np.ndarray) -> Any:
            return panoramia_audit(values, members, baseline, confidence=confidence, gamma=args.gamma or 0.0)

        return _Outcome({method: panoramia(scores)}, {method: panoramia(perfect_scores(members)).epsilon_lb}, {},
                        scores.shape[0], _RUNS[method], ("scores", scores, members))
    scores, members = _scores_and_members(read_columns(args.scores, ("score", "member")))
    names = ALL_METHODS if method == "all" else (method,)
    each = 1.0 - (1.0 - confidence) / len(ALL_METHODS) if method == "all" else confidence
    results = {name: _score_method(name, scores, members, args, each, delta) for name in names}
    perfect = perfect_scores(members)
    ceilings = {name: _score_method(name, perfect, members, args, each, delta).epsilon_lb for name in names}
    roc = method in ("all", "clopper-pearson", "gdp")
    extra = {"roc": roc_summary(scores, members).to_dict()} if roc else {}
    return _Outcome(results, ceilings, extra, scores.shape[0], _RUNS[method], ("scores", scores, members))


def _claimed(claim: Claim | None, delta: float) -> dict[str, Any]:
    """The keyword arguments of :func:`bngp.audit.read_bound` for ``claim`` at the bound's ``delta``."""
    if claim is None:
        return {}
    epsilon = claim.epsilon_at(delta)
    if epsilon is not None:
        return {"claimed_epsilon": epsilon}
    if claim.family == "gaussian":
        return {"not_comparable": f"{claim.spec} states no finite eps at delta = 0 (audit at a delta > 0)"}
    return {"not_comparable": f"{claim.spec} is stated at delta {claim.delta:g}, the bound at delta {delta:g} below it"}


def _reading(method: str, result: Any, ceiling: float, claim: Claim | None) -> BoundReading:
    design, advice = _design(method, result)
    return read_bound(result.epsilon_lb, _epsilon_kind(method, result), ceiling, design, advice,
                      **_claimed(claim, result.delta))


def _row(method: str, result: Any, reading: BoundReading) -> dict[str, Any]:
    return {
        "method": method,
        "epsilon_lb": result.epsilon_lb,
        "epsilon_kind": _epsilon_kind(method, result),
        **reading.to_dict(),
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
        mu = getattr(results.get(method), "mu_lb", None)
        if mu is not None and np.isfinite(mu):
            curves.append((f"{method}: mu_lb = {mu:.3f} Gaussian curve", _CURVE_X, gaussian_tradeoff(mu)(_CURVE_X)))
    return curves, points


def _tradeoff_scores(outcome: _Outcome, confidence: float) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The scores, labels and confidence of the trade-off region (None for bits): the input's scores,
    or for a SCORES.npz the best target's, at that target's confidence (the Bonferroni share)."""
    kind = outcome.data[0]
    if kind == "bits":
        return None
    if kind == "targets":
        result = next(iter(outcome.results.values()))
        column = result.best_target
        return outcome.data[1][:, column], outcome.data[2][:, column], result.target_confidence
    return outcome.data[1], outcome.data[2], confidence


def run(args: argparse.Namespace) -> int:
    """Validate, audit, write AUDIT.png, AUDIT.md and AUDIT.json atomically, print a summary."""
    _check_options(args)
    claim = None if args.claim is None else parse_claim(args.claim, "--claim")
    outputs, markdown_path, png_path = claim_report_outputs(args.out, force=args.force)
    out = outputs.paths[0]
    confidence = check_confidence(args.confidence)
    delta = check_delta(_DEFAULT_DELTA[args.method] if args.delta is None else args.delta)
    if args.method == "panoramia" and delta != 0.0:
        raise InputError(
            "`--delta` does not apply to panoramia (a pure-DP measurement); use --gamma for (c, gamma)-closeness."
        )
    if args.method == "all" and delta == 0.0:
        raise InputError("`--delta` must be > 0 with --method all (gdp and fdp-one-run have no finite eps at delta 0).")
    outcome = _audit(args, confidence, delta)
    results = outcome.results
    readings = {name: _reading(name, item, outcome.ceilings[name], claim) for name, item in results.items()}
    table = [_row(name, item, readings[name]) for name, item in results.items()]
    notes: list[str] = []
    if args.method == "all":
        valid = [row for row in table if row["epsilon_kind"] == BOUND_KINDS[0]]
        best = max(valid, key=lambda row: row["epsilon_lb"])
        ceiling = max(row["epsilon_ceiling"] for row in valid)
        reading = read_bound(best["epsilon_lb"], best["epsilon_kind"], ceiling, f"{outcome.rows} rows",
                             "more rows", **_claimed(claim, delta))
        head: dict[str, Any] = {
            "epsilon_lb": best["epsilon_lb"],
            "epsilon_kind": best["epsilon_kind"],
            "epsilon_lb_method": best["method"],
            **reading.to_dict(),
            "confidence": confidence,
            "delta": delta,
            "method_confidence": table[0]["confidence"],
            "union_bound": f"bonferroni over the {len(ALL_METHODS)} methods (each at confidence 1 - beta/{len(ALL_METHODS)})",
            "methods": {
                row["method"]: {key: value for key, value in row.items() if key not in ("method", "detail")}
                | {"result": results[row["method"]].to_dict()}
                for row in table
            },
        }
        certified = (best["method"], best["epsilon_lb"], delta)
        summary = f"{best['method']}, {best['epsilon_kind']}; best of {len(ALL_METHODS)} methods"
        notes.append(
            f"Each method ran at confidence {table[0]['confidence']:g} = 1 - beta/{len(ALL_METHODS)} (Bonferroni over "
            f"the {len(ALL_METHODS)} methods), so all rows, and the largest of them, hold together at confidence "
            f"{confidence:g}. epsilon_lb is the largest row of kind 'lower bound'; rows of kind 'lower bound under "
            "assumption' (gdp, fdp-one-run) assume a Gaussian trade-off curve and are otherwise estimates."
        )
        notes.append("Not run: panoramia (needs baseline scores or real non-members) and bits (needs guesses).")
    else:
        result = results[args.method]
        reading = readings[args.method]
        head = {
            "epsilon_lb": result.epsilon_lb,
            "epsilon_kind": table[0]["epsilon_kind"],
            **reading.to_dict(),
            "confidence": confidence,
            "delta": result.delta,
            "result": result.to_dict(),
        }
        certified = (args.method, result.epsilon_lb, result.delta)
        summary = result.method
        assumption = getattr(result, "epsilon_assumption", None)
        if assumption and table[0]["epsilon_kind"] != BOUND_KINDS[0]:
            notes.append(f"epsilon_lb assumes: {assumption}.")
        if args.method == "panoramia":
            notes.append(result.interpretation)
    notes += reading.notes()
    payload: dict[str, Any] = {
        "format": AUDIT_FORMAT,
        "command": "audit",
        "method": args.method,
        "input": str(args.scores),
        **({"attack": args.attack} if args.attack else {}),
        "rows": outcome.rows,
        "runs": outcome.runs,
        **head,
        **outcome.extra,
    }
    region = None
    tradeoff_input = _tradeoff_scores(outcome, confidence)
    if tradeoff_input is not None:
        curve = empirical_tradeoff(*tradeoff_input[:2], confidence=tradeoff_input[2])
        payload["tradeoff"] = curve.to_dict()
        region = {key: getattr(curve, key) for key in
                  ("alpha", "beta", "alpha_upper", "beta_upper", "alpha_lower", "beta_lower", "confidence")}
        if claim is not None:
            payload["claim"] = check_claim(curve, claim).to_dict()
        if outcome.data[0] == "targets":
            notes.append(
                f"The trade-off region is that of the best target's {tradeoff_input[0].shape[0]} scores (one per "
                f"release, independent runs) at confidence {tradeoff_input[2]:.4g} = 1 - beta/K' (Bonferroni over "
                "the targets), so the region and the claim verdict hold at the stated confidence."
            )
        if args.method in ("one-run", "fdp-one-run", "panoramia"):
            notes.append(
                "The trade-off region and the claim verdict treat every score as an independent run of the "
                "mechanism; for the scores of one run (canaries of one training) or generated non-members they "
                "are descriptive, not a test."
            )
    else:
        if claim is not None:
            bits_result = results["bits"]
            payload["claim"] = check_claim_error_rate(claim, bits_result.error_rate_upper,
                                                      confidence=confidence).to_dict()
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
    curves, points = _figure(claim, certified, results, outcome.data)
    title = f"bngp audit ({args.method}): {Path(str(args.scores)).name}"
    with outputs.staged() as stage:
        plot_tradeoff(stage(png_path), region=region, curves=curves, points=points, title=title)
        write_text(stage(markdown_path), audit_markdown(payload, table, notes))
        write_json(stage(out), to_jsonable(payload))
    print(f"epsilon_lb = {payload['epsilon_lb']:.4f} ({summary}, confidence {confidence:g}, delta {payload['delta']:g}; "
          f"design ceiling {payload['epsilon_ceiling']:.4f}) -> {args.out}, {markdown_path}, {png_path}")
    if reading.claim_verdict is not None:
        print(f"claimed eps: {reading.claim_verdict}")
    if claim is not None:
        check = payload["claim"]
        verdict = "refuted" if check["refuted"] else "not refuted"
        print(f"claim {check['claim']}: {verdict} at confidence {check['confidence']:g} (at FPR <= "
              f"{check['alpha']:.4g}: FNR <= {check['beta_upper']:.4g}, claimed >= {check['claimed_beta']:.4g})")
    return 0
