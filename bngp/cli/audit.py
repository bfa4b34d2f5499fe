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

AUDIT.json (``format`` :data:`bngp.cli.audit_report.AUDIT_FORMAT`) always has ``epsilon_lb`` plus the full result record
of the method (and, for score-based many-run methods, the empirical ROC summary), ``runs`` (what
the rows are assumed to be), and ``epsilon_kind``: ``"lower bound"`` (no assumption), ``"lower
bound under assumption"`` (``gdp`` and ``fdp-one-run``: the trade-off curve is Gaussian; bits with
``--family gdp|laplace``) or ``"estimate"`` (PANORAMIA with generated non-members).  Next to the
bound: ``epsilon_ceiling``, the largest eps the design can certify, the same method's bound on a
perfect attack's scores (:mod:`bngp.audit.ceiling`), its ``ceiling_state`` and ``reading``; with
``--claim``, ``claimed_epsilon`` (the claim's eps at the audit's delta) and ``claim_verdict``
(refuted iff an assumption-free epsilon_lb exceeds it); and ``audit_decision``
(:func:`bngp.audit.audit_decision`), the verdict AUDIT.md opens with and the command prints last: claim
refuted (by the bound, or by the trade-off check where the scores are independent runs), consistent, at
the design's ceiling, design too small, nothing certified, or the bound itself.  Bad input gives a
one-line error and exit code 2 before anything is written.

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

``--method all`` runs ``clopper-pearson``, ``gdp``, ``one-run`` and ``fdp-one-run`` (searches;
:func:`bngp.audit.audit_all`) on the same scores at one delta (default 1e-5), each at confidence 1 - beta / 4 (Bonferroni over
the four, so that all rows, and the largest of them, hold together at the stated confidence).
AUDIT.json gets ``methods`` (name -> epsilon_lb, epsilon_kind, confidence, delta, the ceiling
and claim fields, result) and a top-level ``epsilon_lb``: the largest bound of kind ``"lower
bound"``, from ``epsilon_lb_method``, read against the largest ceiling of those rows.  PANORAMIA
(baseline scores or real non-members) and bits (guesses) are not run by ``all``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bngp.cli import COMMANDS, HelpFormatter
from bngp.audit import (
    CLAIM_FORMATS,
    FAMILIES,
    INTERVALS,
    PER_TARGET_METHODS,
    Claim,
    audit_all,
    bits_audit,
    panoramia_audit,
    parse_claim,
    per_target_audit,
    perfect_scores,
    read_result,
    roc_summary,
    score_method_audit,
)
from bngp.audit.results import to_jsonable
from bngp.audit.inputs import check_confidence, check_delta, check_labels, check_scores_and_labels
from bngp.audit.thresholds import DEFAULT_STRATEGY
from bngp.cli.audit_inputs import is_npz, read_columns, read_scores_npz
from bngp.cli.audit_report import AuditOutcome, build_report
from bngp.errors import InputError
from bngp.io_utils import write_json, write_text
from bngp.report import audit_markdown, plot_tradeoff
from bngp.outputs import add_force_arg, claim_report_outputs
from bngp.validation import check_finite_array

__all__ = ["INPUT_FORMATS", "METHODS", "add_parser", "run"]

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

#: audit methods of the command ("all": every method of bngp.audit.ALL_METHODS on the same scores).
METHODS = ("clopper-pearson", "one-run", "fdp-one-run", "gdp", "panoramia", "bits", "all")

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


def _npz_refusal(path: str, method: str) -> str:
    return (f"{path} holds `bngp evaluate` scores (releases x targets), which are not independent runs: each release "
            f"draws its members jointly, not by an independent fair coin per canary, so --method {method} does not "
            "apply to them; use --method clopper-pearson or gdp (audited per target, one score per release) or a "
            "canary audit, `bngp audit-mechanism --mode one-run|many-run|panoramia`.")


def _outcome(results: dict[str, Any], ceilings: dict[str, float], claim: Claim | None, **fields: Any) -> AuditOutcome:
    """The outcome of one method (or several, read one by one) with every bound read against its ceiling."""
    readings = {name: read_result(name, item, ceilings[name], claim) for name, item in results.items()}
    return AuditOutcome(results, ceilings, readings, **fields)


def _npz_outcome(args: argparse.Namespace, confidence: float, delta: float, claim: Claim | None) -> AuditOutcome:
    """A SCORES.npz of ``bngp evaluate``, audited per target (:func:`bngp.audit.per_target_audit`)."""
    method = args.method
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
    return _outcome({method: result}, {method: per_target(perfect_scores(labels)).epsilon_lb}, claim,
                    extra={"roc": pooled}, rows=scores.size, runs=runs, data=("targets", scores, labels))


def _bits_outcome(args: argparse.Namespace, confidence: float, delta: float, claim: Claim | None) -> AuditOutcome:
    columns = read_columns(args.scores, ("guess", "bit"))
    bits = check_labels("bit", columns["bit"])
    guesses = check_labels("guess", columns["guess"], length=bits.shape[0])

    def bits_bound(values: np.ndarray) -> Any:
        return bits_audit(values, bits, confidence=confidence, delta=delta, family=args.family or "eps-delta",
                          interval=args.interval or "clopper-pearson")

    return _outcome({"bits": bits_bound(guesses)}, {"bits": bits_bound(bits).epsilon_lb}, claim, extra={},
                    rows=bits.shape[0], runs=_RUNS["bits"], data=("bits", guesses, bits))


def _panoramia_outcome(args: argparse.Namespace, confidence: float, claim: Claim | None) -> AuditOutcome:
    real = bool(args.real_nonmembers)
    columns = read_columns(args.scores, ("score", "member") if real else ("score", "member", "baseline_score"))
    scores, members = _scores_and_members(columns)
    baseline = None if real else check_finite_array("baseline_score", columns["baseline_score"], ndim=1)

    def panoramia(values: np.ndarray) -> Any:
        return panoramia_audit(values, members, baseline, confidence=confidence, gamma=args.gamma or 0.0)

    method = "panoramia"
    return _outcome({method: panoramia(scores)}, {method: panoramia(perfect_scores(members)).epsilon_lb},
                    claim, extra={}, rows=scores.shape[0], runs=_RUNS[method], data=("scores", scores, members))


def _audit(args: argparse.Namespace, confidence: float, delta: float, claim: Claim | None) -> AuditOutcome:
    """Run the chosen audit (or, for ``all``, :func:`bngp.audit.audit_all`) and its ceiling."""
    method = args.method
    from_npz = is_npz(args.scores)
    if from_npz and method not in PER_TARGET_METHODS:
        raise InputError(_npz_refusal(args.scores, method))
    if args.attack is not None and not from_npz:
        raise InputError("`--attack` applies only to a SCORES.npz of `bngp evaluate --scores-out`.")
    if from_npz:
        return _npz_outcome(args, confidence, delta, claim)
    if method == "bits":
        return _bits_outcome(args, confidence, delta, claim)
    if method == "panoramia":
        return _panoramia_outcome(args, confidence, claim)
    scores, members = _scores_and_members(read_columns(args.scores, ("score", "member")))
    counts = {"k_plus": None if args.k_plus is None else _parse_counts("--k-plus", args.k_plus),
              "k_minus": None if args.k_minus is None else _parse_counts("--k-minus", args.k_minus)}
    options = dict(confidence=confidence, delta=delta, strategy=args.strategy, seed=args.seed, **counts)
    fields = dict(rows=scores.shape[0], runs=_RUNS[method], data=("scores", scores, members))
    if method == "all":
        record = audit_all(scores, members, claim=claim, **options)
        extra = {"roc": roc_summary(scores, members).to_dict()}
        return AuditOutcome(dict(record.results), dict(record.ceilings), dict(record.readings), extra, combined=record,
                            **fields)
    result = score_method_audit(method, scores, members, **options)
    ceiling = score_method_audit(method, perfect_scores(members), members, **options).epsilon_lb
    extra = {"roc": roc_summary(scores, members).to_dict()} if method in ("clopper-pearson", "gdp") else {}
    return _outcome({method: result}, {method: ceiling}, claim, extra=extra, **fields)


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
    outcome = _audit(args, confidence, delta, claim)
    source = {"input": str(args.scores), **({"attack": args.attack} if args.attack else {})}
    report = build_report(args.method, source, outcome, claim, confidence, delta,
                          {"markdown": str(markdown_path), "png": str(png_path)})
    payload = report.payload
    title = f"bngp audit ({args.method}): {Path(str(args.scores)).name}"
    with outputs.staged() as stage:
        plot_tradeoff(stage(png_path), region=report.region, curves=report.curves, points=report.points, title=title)
        write_text(stage(markdown_path), audit_markdown(payload, report.table, report.notes))
        write_json(stage(out), to_jsonable(payload))
    print(f"epsilon_lb = {payload['epsilon_lb']:.4f} ({report.summary}, confidence {confidence:g}, delta "
          f"{payload['delta']:g}; design ceiling {payload['epsilon_ceiling']:.4f}) -> {args.out}, {markdown_path}, "
          f"{png_path}")
    if report.reading.claim_verdict is not None:
        print(f"claimed eps: {report.reading.claim_verdict}")
    if claim is not None:
        check = payload["claim"]
        verdict = "refuted" if check["refuted"] else "not refuted"
        print(f"claim {check['claim']}: {verdict} at confidence {check['confidence']:g} (at FPR <= "
              f"{check['alpha']:.4g}: FNR <= {check['beta_upper']:.4g}, claimed >= {check['claimed_beta']:.4g})")
    print(f"audit: {report.decision.sentence}")
    return 0
