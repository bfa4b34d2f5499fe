"""The outside ridge attack of experiments/outside_ridge.py (numpy and scikit-learn only), the
reviewer's check on the product's attackers: against scikit-learn's Ridge and on known cases."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import Ridge

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from outside_ridge import mean_release_auc, outside_ridge  # noqa: E402


def _releases(n: int, rng: np.random.Generator, signal: np.ndarray, noise: float) -> tuple[np.ndarray, np.ndarray]:
    b = np.zeros((n, signal.shape[0]))
    for row in b:
        row[rng.choice(signal.shape[0], signal.shape[0] // 2, replace=False)] = 1.0
    return b @ signal + noise * rng.normal(size=(n, signal.shape[1])), b


def _sklearn_auc(result: dict, train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]) -> float:
    """Test AUC of scikit-learn's Ridge at the chosen penalty (alpha = penalty * largest eigenvalue
    of X_c^T X_c), scored without its fitted intercept."""
    centred = train[0] - train[0].mean(axis=0)
    alpha = result["penalty"] * np.linalg.eigvalsh(centred.T @ centred).max()
    model = Ridge(alpha=alpha).fit(*train)
    return mean_release_auc((test[0] - train[0].mean(axis=0)) @ model.coef_.T, test[1])


def test_scores_are_sklearn_ridge_at_the_chosen_penalty():
    """At its chosen penalty the map is scikit-learn's Ridge without the fitted intercept: every
    individual has the same prior mean n / K, and the shadow mean membership would only add
    sampling noise to the ranking (here it moves the test AUC by about 0.1)."""
    rng = np.random.default_rng(0)
    signal = rng.normal(size=(8, 30))
    train, validation, test = (_releases(n, rng, signal, 4.0) for n in (200, 100, 50))
    result = outside_ridge(*train, *validation, *test)
    assert result["auc"] == pytest.approx(_sklearn_auc(result, train, test), abs=1e-12)
    assert result["validation_auc"] == max(auc for _, auc in result["path"])


def test_more_attributes_than_shadow_releases_is_sklearn_ridge_too():
    """q > n (the beacon case): the spectrum comes from the n x n Gram matrix, and the scores at the
    chosen penalty are still scikit-learn's Ridge."""
    rng = np.random.default_rng(2)
    signal = rng.normal(size=(8, 120))
    train, validation, test = (_releases(n, rng, signal, 4.0) for n in (60, 40, 30))
    result = outside_ridge(*train, *validation, *test)
    assert result["auc"] == pytest.approx(_sklearn_auc(result, train, test), abs=1e-9)
    assert result["auc"] > 0.8  # the signal is found (0.885 measured)


def test_constant_and_noiseless_releases():
    """A release that does not vary reads 0.5 (no signal, no crash); a noiseless one reads 1."""
    rng = np.random.default_rng(1)
    signal = rng.normal(size=(8, 30))
    constant = [(np.full((n, 30), 0.25), _releases(n, rng, signal, 0.0)[1]) for n in (100, 60, 40)]
    assert outside_ridge(*constant[0], *constant[1], *constant[2])["auc"] == 0.5
    wide = [(np.full((n, 300), 0.25), b) for (_, b), n in zip(constant, (100, 60, 40))]  # q > n: the Gram path
    assert outside_ridge(*wide[0], *wide[1], *wide[2])["auc"] == 0.5
    exact = [_releases(n, rng, signal, 0.0) for n in (100, 60, 40)]
    assert outside_ridge(*exact[0], *exact[1], *exact[2])["auc"] == 1.0


def test_the_learning_curve_fits_growing_prefixes_of_the_same_draws(tmp_path, capsys):
    """``--shadow 100 200``: the last point is the single fit on 200 shadow releases (same draws,
    same validation and test releases), every point records its size, and the counts must grow."""
    import json

    import outside_ridge as script

    from bngp.data import simulate_independent
    from bngp.data.npz import save_population

    population = tmp_path / "pop.npz"
    save_population(simulate_independent(40, 20, 60, seed=0), population)
    common = ["--population", str(population), "--members", "20", "--defense", "laplace:epsilon=300",
              "--validation", "40", "--test", "20", "--seed", "3"]
    assert script.main([*common, "--shadow", "200", "--out", str(tmp_path / "one.json")]) == 0
    assert script.main([*common, "--shadow", "100", "200", "--out", str(tmp_path / "curve.json")]) == 0
    one, curve = (json.loads((tmp_path / name).read_text()) for name in ("one.json", "curve.json"))
    assert [point["shadow_releases"] for point in curve["learning_curve"]] == [100, 200]
    assert curve["learning_curve"][-1]["auc"] == curve["auc"] == one["auc"] and curve["penalty"] == one["penalty"]
    assert "learning_curve" not in one and one["matmul_flops_float32"] > 0
    missing = [str(tmp_path / "missing.npz") if arg == str(population) else arg for arg in common]
    with pytest.raises(SystemExit) as raised:  # refused before the population is read
        script.main([*missing, "--shadow", "200", "100"])
    assert raised.value.code == 2 and "increasing" in capsys.readouterr().err
