"""Benchmark: the many-run Clopper-Pearson bound over every distinct threshold of 1e6 scores.

Acceptance target: ``bngp.audit.many_run_audit`` (Bonferroni strategy, every distinct score a
threshold) on 1,000,000 scores takes under 2 seconds.  The timing is reported together with
a reference measured in the same run on the same scores, a plain ``np.sort`` (and
``np.argsort``, which the audit performs once), as a ratio.  The GDP audit and a signal-free
score set are timed too.  With ``--naive`` the script also times the textbook approach
(one exact Beta quantile pair per distinct threshold) and checks that both give the same
bound.  The machine may be shared, so every timing is the best of ``--repeats`` runs.

Usage::

    OMP_NUM_THREADS=1 python experiments/benchmarks/audit.py [--scores 1000000] [--repeats 3]
        [--naive] [--out bench_audit.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import numpy as np

from bngp.audit import clopper_pearson_upper, gdp_audit, many_run_audit
from bngp.audit.roc import threshold_counts
from bngp.io_utils import write_json

TARGET_SECONDS = 2.0


def _best_seconds(function: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Best wall time of ``repeats`` calls and the last return value."""
    best, value = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def _epsilon(alpha_u: np.ndarray, beta_u: np.ndarray) -> np.ndarray:
    """eps(alpha_u, beta_u) = max(ln((1 - alpha_u) / beta_u), ln((1 - beta_u) / alpha_u)), -inf where undefined.

    The (eps, 0)-DP bound of a threshold test with upper bounds alpha_u on its false positive rate
    and beta_u on its false negative rate (Kairouz et al., arXiv:1311.0776, Theorem 2.1), written
    here independently of :mod:`bngp.audit` so that the naive reference checks it.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.log(1.0 - alpha_u) - np.log(beta_u)
        second = np.log(1.0 - beta_u) - np.log(alpha_u)
    return np.maximum(np.where(np.isnan(first), -np.inf, first), np.where(np.isnan(second), -np.inf, second))


def _naive_bound(scores: np.ndarray, members: np.ndarray, confidence: float) -> float:
    """Exact quantiles at every distinct threshold, no pruning (the reference algorithm)."""
    labels = members.astype(bool)
    _, tp, fp = threshold_counts(scores, labels)
    n1 = int(labels.sum())
    n0 = labels.size - n1
    beta = 1.0 - confidence
    alpha_u = clopper_pearson_upper(fp, n0, beta / (2 * n0))
    beta_u = clopper_pearson_upper(n1 - tp, n1, beta / (2 * n1))
    return max(float(np.max(_epsilon(alpha_u, beta_u))), 0.0)


def run(n_scores: int, shift: float, seed: int, repeats: int, naive: bool) -> dict:
    rng = np.random.default_rng(seed)
    members = rng.integers(0, 2, n_scores)
    scores = rng.normal(size=n_scores) + shift * members
    noise = rng.normal(size=n_scores)
    sort_seconds, _ = _best_seconds(lambda: np.sort(scores), repeats)
    argsort_seconds, _ = _best_seconds(lambda: np.argsort(scores), repeats)
    audit_seconds, result = _best_seconds(lambda: many_run_audit(scores, members, strategy="bonferroni"), repeats)
    gdp_seconds, gdp = _best_seconds(lambda: gdp_audit(scores, members), repeats)
    null_seconds, null = _best_seconds(lambda: many_run_audit(noise, members, strategy="bonferroni"), repeats)
    results: dict = {
        "scores": n_scores,
        "members": int(members.sum()),
        "shift": shift,
        "seed": seed,
        "repeats": repeats,
        "distinct_thresholds": result.thresholds_examined,
        "reference_seconds": {"np_sort": sort_seconds, "np_argsort": argsort_seconds},
        "many_run": {
            "seconds": audit_seconds,
            "ratio_to_np_sort": audit_seconds / sort_seconds,
            "ratio_to_np_argsort": audit_seconds / argsort_seconds,
            "epsilon_lb": result.epsilon_lb,
            "union_bound": result.union_bound,
        },
        "gdp": {"seconds": gdp_seconds, "mu_lb": gdp.mu_lb, "epsilon_lb_at_1e-5": gdp.epsilon_lb},
        "signal_free": {"seconds": null_seconds, "epsilon_lb": null.epsilon_lb},
        "target_seconds": TARGET_SECONDS,
        "target_met": audit_seconds < TARGET_SECONDS,
    }
    if naive:
        naive_seconds, naive_value = _best_seconds(lambda: _naive_bound(scores, members, 0.95), 1)
        results["naive_all_quantiles"] = {
            "seconds": naive_seconds,
            "epsilon_lb": naive_value,
            "speedup": naive_seconds / audit_seconds,
            "agrees": bool(np.isclose(naive_value, result.epsilon_lb, rtol=1e-9, atol=1e-12)),
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scores", type=int, default=1_000_000)
    parser.add_argument("--shift", type=float, default=1.0, help="member score shift (signal strength)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="timings are the best of this many runs")
    parser.add_argument("--naive", action="store_true", help="also time exact quantiles at every threshold")
    parser.add_argument("--out", default="bench_audit.json", help="write the results as JSON here")
    args = parser.parse_args(argv)
    results = run(args.scores, args.shift, args.seed, args.repeats, args.naive)
    print(json.dumps(results, indent=2))
    write_json(args.out, results)
    return 0 if results["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
