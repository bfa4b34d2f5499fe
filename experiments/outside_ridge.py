"""An outside attack, written from scratch with numpy and scikit-learn only: ridge regression from
the release to the membership vector, its penalty chosen on validation releases over the whole
spectrum.

It shares no code with the product's attackers (``bngp.linear``, ``bngp.attacks``): it is the
reviewer's check that the product's strongest attack is not weaker than a textbook attacker
fitted on thousands of shadow releases.  Only the releases themselves come from the product
(``bngp release --draws`` writes them for any defense).

    python experiments/outside_ridge.py --population POP.npz --members N --defense SPEC \\
        --shadow 8000 --seed 0 --out outside.json

``--shadow 2000 4000 8000 16000`` fits it on growing prefixes of the same shadow releases (same
validation and test releases) and records the learning curve.

The AUC is the mean over test releases of the per-release AUC (scikit-learn's roc_auc_score).
Memberships are drawn n of K uniformly, so every individual's prior mean is n / K: the map has
no per-individual intercept (the shadow mean membership would only add sampling noise to the
ranking), and the penalty is chosen on exactly the scores that are tested.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from sklearn.metrics import roc_auc_score

#: penalties relative to the largest eigenvalue of X_c^T X_c: 1e-10 .. 1e2.
PENALTIES = 10.0 ** np.arange(-10.0, 2.01, 0.5)


def release_aucs(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """roc_auc_score(labels[i], scores[i]) of every row."""
    return np.array([roc_auc_score(y, s) for s, y in zip(scores, labels)])


def mean_release_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mean over rows of roc_auc_score(labels[i], scores[i])."""
    return float(np.mean(release_aucs(scores, labels)))


def _spectrum(xc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(e, V) with X_c^T X_c = V diag(e) V^T on the row space of X_c.  With more attributes than
    releases (q > n) from the n x n Gram matrix X_c X_c^T = U diag(e) U^T, V = X_c^T U diag(e)^-1/2
    (its nonzero eigenvalues are X_c^T X_c's; X_c^T B_c has no component outside that space, so
    the ridge solutions are the same), which never forms the q x q matrix."""
    n, q = xc.shape
    if q <= n:
        eigenvalues, vectors = np.linalg.eigh(xc.T @ xc)  # X_c^T X_c = V diag(e) V^T
        return np.clip(eigenvalues, 0.0, None), vectors
    eigenvalues, u = np.linalg.eigh(xc @ xc.T)
    if not eigenvalues.max() > 0:  # releases that do not vary: no direction, the scores are all 0
        return np.zeros(1), np.zeros((q, 1))
    keep = eigenvalues > eigenvalues.max() * 1e-12
    eigenvalues, u = eigenvalues[keep], u[:, keep]
    return eigenvalues, xc.T @ (u / np.sqrt(eigenvalues))


def outside_ridge(
    train_x: np.ndarray, train_b: np.ndarray, val_x: np.ndarray, val_b: np.ndarray, test_x: np.ndarray, test_b: np.ndarray
) -> dict:
    """Fit ridge for every penalty, pick the best validation AUC, report its test AUC."""
    x_mean = train_x.mean(axis=0)
    xc, bc = train_x - x_mean, train_b - train_b.mean(axis=0)
    eigenvalues, vectors = _spectrum(xc)
    cross = vectors.T @ (xc.T @ bc)
    val_rotated = (val_x - x_mean) @ vectors
    top = eigenvalues.max()

    def solve(penalty: float) -> np.ndarray:
        """diag(1 / (e + penalty * top)) V^T X_c^T B_c, zero where the releases do not vary."""
        denominator = (eigenvalues + penalty * top)[:, None]
        return np.divide(cross, denominator, out=np.zeros_like(cross), where=denominator > 1e-300)

    path = []
    for penalty in PENALTIES:
        path.append(mean_release_auc(val_rotated @ solve(penalty), val_b))
    best = int(np.argmax(path))
    weights = vectors @ solve(PENALTIES[best])
    test_scores = (test_x - x_mean) @ weights  # the same scores as on validation (see the docstring)
    test_aucs = release_aucs(test_scores, test_b)
    return {
        "auc": float(np.mean(test_aucs)),
        "test_auc_std": float(np.std(test_aucs, ddof=1)),
        "penalty": float(PENALTIES[best]),
        "validation_auc": path[best],
        "path": [[float(p), a] for p, a in zip(PENALTIES, path)],
        "shadow_releases": int(train_x.shape[0]),
    }


def attack_defense(population, prior, defense, *, shadow: int, validation: int, test: int, seed: int) -> dict:
    """Simulate shadow + validation + test releases of ``defense`` with the product's simulator
    (the releases an evaluation sees; memberships n of K uniformly) and run :func:`outside_ridge`."""
    return learning_curve(population, prior, defense, shadows=(shadow,), validation=validation, test=test,
                          seed=seed)[-1]


def learning_curve(population, prior, defense, *, shadows: tuple[int, ...], validation: int, test: int,
                   seed: int) -> list[dict]:
    """:func:`outside_ridge` fitted on the first n shadow releases for every n in ``shadows``
    (increasing), with the same validation and test releases: does more shadow data still raise
    the outside ridge's AUC?"""
    from bngp.attacks.base import release_simulator
    from bngp.release.sampling import release_mechanism

    simulate = release_simulator(release_mechanism(population.genotypes, defense.composition), prior, defense)
    largest = shadows[-1]
    x, b = simulate(largest + validation + test, 10_007 + seed)
    b = b.astype(np.float64)
    v = largest + validation
    return [outside_ridge(x[:n], b[:n], x[largest:v], b[largest:v], x[v:], b[v:]) for n in shadows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", required=True)
    parser.add_argument("--members", type=int, required=True)
    parser.add_argument("--defense", required=True)
    parser.add_argument("--shadow", type=int, nargs="+", default=[8000],
                        help="shadow releases; several (increasing) give the learning curve on the same draws")
    parser.add_argument("--validation", type=int, default=500)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    from bngp.cli.common import load_population_and_prior
    from bngp.defenses.registry import DefenseContext, parse_defense_spec
    from bngp.reproduce.report import REFERENCE_MATMUL
    from bngp.timing import matmul_flops

    shadows = tuple(args.shadow)
    if any(n < 2 for n in shadows) or list(shadows) != sorted(set(shadows)):
        parser.error("--shadow: increasing counts of at least 2")  # before any loading or simulation
    started = time.perf_counter()
    population, prior = load_population_and_prior(args.population, args.members)
    defense = parse_defense_spec(args.defense, DefenseContext(population, args.members))
    curve = learning_curve(population, prior, defense, shadows=shadows, validation=args.validation, test=args.test,
                           seed=args.seed)
    result = dict(curve[-1])
    if len(curve) > 1:
        result["learning_curve"] = [{"shadow_releases": point["shadow_releases"], "auc": point["auc"],
                                     "validation_auc": point["validation_auc"], "penalty": point["penalty"]}
                                    for point in curve]
    result.update({"defense": args.defense, "seed": args.seed, "seconds": time.perf_counter() - started,
                   "matmul_flops_float32": matmul_flops(*REFERENCE_MATMUL)})  # the seconds' reference, same run
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")
    print(json.dumps({k: result[k] for k in ("defense", "auc", "penalty", "shadow_releases", "seconds",
                                              "matmul_flops_float32")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
