"""Raw statistics against direct numpy transcriptions of shared/reference/attacks.md."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bngp.attacks.statistics as statistics
from bngp.attacks.statistics import (
    dwork_score,
    dwork_score_torch,
    homer,
    homer_torch,
    lrs,
    lrs_torch,
    weighted_score,
)
from bngp.errors import DataFormatError, InputError


def _inputs(seed: int = 0, n_targets: int = 7, n_releases: int = 4, n_snvs: int = 50):
    rng = np.random.default_rng(seed)
    targets = (rng.random((n_targets, n_snvs)) < 0.4).astype(np.uint8)
    releases = rng.random((n_releases, n_snvs))
    releases[0, :3] = [0.0, 1.0, 0.5]
    p_bar = rng.uniform(0.05, 0.95, n_snvs)
    return targets, releases, p_bar


def _lrs_transcription(d: np.ndarray, x: np.ndarray, p: np.ndarray, eps: float) -> np.ndarray:
    """sum_j d log(p / x) + (1 - d) log((1 - p) / (1 - x)), one (release, target) pair at a time."""
    x = np.clip(x, eps, 1 - eps)
    p = np.clip(p, eps, 1 - eps)
    out = np.empty((x.shape[0], d.shape[0]))
    for r in range(x.shape[0]):
        for k in range(d.shape[0]):
            out[r, k] = np.sum(d[k] * np.log(p / x[r]) + (1 - d[k]) * np.log((1 - p) / (1 - x[r])))
    return out


def _dwork_transcription(d: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.array([[np.dot(d[k] - p, x[r] - p) for k in range(d.shape[0])] for r in range(x.shape[0])])


def _homer_transcription(d: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.abs(d[None, :, :] - p).sum(axis=2) - np.abs(d[None, :, :] - x[:, None, :]).sum(axis=2)


def test_lrs_matches_transcription() -> None:
    targets, releases, p_bar = _inputs()
    expected = _lrs_transcription(targets.astype(float), releases, p_bar, 1e-3)
    np.testing.assert_allclose(lrs(targets, releases, p_bar), expected, rtol=1e-12, atol=1e-10)
    expected = _lrs_transcription(targets, releases, p_bar, 1e-6)
    np.testing.assert_allclose(lrs(targets, releases, p_bar, epsilon=1e-6), expected, rtol=1e-12)


def test_dwork_score_matches_transcription() -> None:
    targets, releases, p_bar = _inputs(1)
    expected = _dwork_transcription(targets, releases, p_bar)
    np.testing.assert_allclose(dwork_score(targets, releases, p_bar), expected, atol=1e-12)


def test_homer_matches_transcription() -> None:
    targets, releases, p_bar = _inputs(2)
    expected = _homer_transcription(targets, releases, p_bar)
    np.testing.assert_allclose(homer(targets, releases, p_bar), expected, atol=1e-12)


def test_homer_torch_exact_outside_unit_interval() -> None:
    """The affine form keeps |y - x| exact for binary y even when x leaves [0, 1] (unclipped noise)."""
    targets, releases, p_bar = _inputs(3)
    shifted = releases * 1.6 - 0.3
    got = homer_torch(targets, torch.from_numpy(shifted), p_bar).numpy()
    np.testing.assert_allclose(got, _homer_transcription(targets, shifted, p_bar), atol=1e-12)


def test_weighted_score_matches_transcription() -> None:
    targets, releases, p_bar = _inputs(4)
    expected = np.einsum("kj,rj->rk", targets - p_bar, (releases - p_bar) / (p_bar * (1 - p_bar)))
    np.testing.assert_allclose(weighted_score(targets, releases, p_bar), expected, atol=1e-10)


def test_blocks_over_snvs_and_releases_give_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    targets, releases, p_bar = _inputs(5, n_targets=9, n_releases=5, n_snvs=300)
    whole = lrs(targets, releases, p_bar)
    monkeypatch.setattr(statistics, "_BLOCK_ELEMENTS", 64 * 9)
    monkeypatch.setattr(statistics, "_RELEASE_BLOCK", 2)
    assert statistics._snv_block(9, 300) == 64
    np.testing.assert_allclose(lrs(targets, releases, p_bar), whole, rtol=1e-12)
    expected = _homer_transcription(targets, releases, p_bar)
    np.testing.assert_allclose(homer(targets, releases, p_bar), expected, atol=1e-12)


def test_float32_releases_are_scored_in_float32_close_to_float64() -> None:
    targets, releases, p_bar = _inputs(6, n_snvs=2000)
    single = lrs(targets, releases.astype(np.float32), p_bar)
    np.testing.assert_allclose(single, lrs(targets, releases, p_bar), rtol=1e-4, atol=1e-2)


def test_bool_and_int_targets_accepted() -> None:
    targets, releases, p_bar = _inputs(7)
    expected = dwork_score(targets, releases, p_bar)
    np.testing.assert_allclose(dwork_score(targets.astype(bool), releases, p_bar), expected)
    np.testing.assert_allclose(dwork_score(targets.astype(np.int64), releases, p_bar), expected)
    np.testing.assert_allclose(dwork_score(targets.astype(np.float32), releases, p_bar), expected)


def test_torch_statistics_are_differentiable() -> None:
    targets, releases, p_bar = _inputs(8, n_targets=3, n_releases=2, n_snvs=12)
    x = torch.tensor(np.clip(releases, 0.05, 0.95), requires_grad=True)
    d = torch.from_numpy(targets)
    for function in (
        lambda value: lrs_torch(d, value, p_bar),
        lambda value: dwork_score_torch(d, value, p_bar),
        lambda value: homer_torch(d, value, p_bar),
    ):
        assert torch.autograd.gradcheck(function, (x,))
    # d/dx_rj of <d_k - p, x_r - p> is d_kj - p_j
    grad = torch.autograd.grad(dwork_score_torch(d, x, p_bar)[1, 2], x)[0]
    np.testing.assert_allclose(grad[1].numpy(), targets[2] - p_bar)
    assert torch.all(grad[0] == 0)


def test_statistic_input_errors() -> None:
    targets, releases, p_bar = _inputs(9)
    with pytest.raises(InputError, match=r"`releases` must have 50 columns \(\|Q\| of the targets\), got 49\."):
        lrs(targets, releases[:, :49], p_bar)
    with pytest.raises(DataFormatError, match=r"`releases` must be frequencies in \[0, 1\], found 1\.5"):
        lrs(targets, np.full((1, 50), 1.5), p_bar)
    with pytest.raises(DataFormatError, match=r"`reference_frequencies` must lie in \[0, 1\], found -0\.1"):
        lrs(targets, releases, np.r_[-0.1, p_bar[1:]])
    bad = targets.copy()
    bad[0, 0] = 2
    with pytest.raises(DataFormatError, match=r"`targets` must be binary \(0/1\), found value 2\."):
        lrs(bad, releases, p_bar)
    with pytest.raises(DataFormatError, match="NaN"):
        lrs(targets, np.full((1, 50), np.nan), p_bar)
