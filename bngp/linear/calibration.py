"""Logistic calibration of attack scores: the weights of sigmoid(features @ a + c) that minimise the
cross-entropy against memberships, by damped Newton steps (logistic regression; Hastie, Tibshirani
and Friedman, *The Elements of Statistical Learning*, section 4.4.1).  The game's objectives
recalibrate the attacker's logits with it (:mod:`bngp.game.objectives`), the network attackers
their heads.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from bngp.device import CHUNK_ELEMENTS

__all__ = ["affine_calibration", "logistic_calibration"]

#: :func:`logistic_calibration` stops when the Newton decrement is below this fraction of the objective.
_NEWTON_DECREMENT = 1e-13

#: :func:`logistic_calibration`'s elementwise passes run over spans of this many logits: a quarter
#: of the chunk of :data:`bngp.device.CHUNK_ELEMENTS`, as a span's passes read and write
#: five float64 arrays (z, exp(-|z|), a term, the losses, the probabilities), so that the next pass
#: finds them in the cache; a multiple of 64 keeps every span but the last aligned as the whole array is.
_CALIBRATION_SPAN = CHUNK_ELEMENTS // 4

#: with more than four times this many logits, :func:`logistic_calibration` first fits an evenly strided subsample of
#: about this many, and its Newton steps on all the logits start from that fit where its objective is the lower.
_PRESOLVE_LOGITS = 2**18


def logistic_calibration(
    features: torch.Tensor, targets: torch.Tensor, iterations: int = 8, penalty: float = 1e-6
) -> torch.Tensor:
    """Weights (a_1..a_m, c) minimising the mean cross-entropy of sigmoid(features @ a + c) against
    targets, plus ``penalty`` / 2 * ||a||^2.  ``features`` (n, m) float, ``targets`` (n,) in
    {0, 1}; returns a float64 tensor of m + 1 entries, the intercept last, on the features' device.

    Logistic regression by damped Newton steps, each halved until the objective decreases.
    Start: a = (1, ..., 1), c = 0, or a = (1, ..., 1) / s, c = 0 when the summed features have a
    standard deviation s > 1 and that start has the lower objective; the result never has a
    higher objective than a = (1, ..., 1), c = 0, and on separable data (an attacker that is
    already perfect) the steps cannot overshoot into a worse calibration.  The rescaled start lets
    saturated logits (a refitted attacker head) calibrate: from a = 1 every Newton step would
    overshoot into the flat tails of the loss and be halved away.  With more than 4 x
    :data:`_PRESOLVE_LOGITS` logits (a refit's releases x candidates), the same fit of every
    ``n // _PRESOLVE_LOGITS``-th logit is a third start: near the optimum, where Newton's method converges
    quadratically, it saves most of the passes over all the logits.  Stops when the Newton step is below
    1e-10 of the weights, or when the Newton decrement g^T H^-1 g is below 1e-13 of the
    objective (a line search could not tell the objectives apart in float64).

    The fit runs in numpy on the CPU whatever the device (the system is (m + 1)-dimensional).  The
    Newton system is solved by LAPACK's SVD driver gelsd (``numpy.linalg.lstsq``), whose result does
    not depend on what the process ran before (gelsy's last bits did), so that one sweep cell run
    after another gives the same result as the cell run alone.
    """
    device = features.device
    columns = features.detach().reshape(features.shape[0], -1).to(torch.float64).cpu().numpy()
    labels = targets.detach().reshape(-1).to(torch.float64).cpu().numpy()
    start = None
    if labels.size > 4 * _PRESOLVE_LOGITS:
        stride = labels.size // _PRESOLVE_LOGITS
        start = _newton_fit(np.ascontiguousarray(columns[::stride]), labels[::stride].copy(), penalty, iterations, None)
    return torch.from_numpy(_newton_fit(columns, labels, penalty, iterations, start)).to(device)


def _newton_fit(columns: np.ndarray, labels: np.ndarray, penalty: float, iterations: int,
                start: np.ndarray | None) -> np.ndarray:
    """The damped Newton steps of :func:`logistic_calibration` on ``columns`` (n, m) float64 and ``labels`` (n,), from
    the best of its starts (``start``: a further one, or None)."""
    objective = _LogisticObjective(columns, labels, penalty)
    # two buffers of probabilities: the accepted point's and a candidate's
    buffers = [np.empty(objective.n), np.empty(objective.n)]
    params = np.ones(columns.shape[1] + 1)
    params[-1] = 0.0
    value, p = objective.evaluate(params, buffers[0]), buffers[0]
    spread = float(np.std(columns[:, 0] if columns.shape[1] == 1 else columns.sum(axis=1)))  # (one feature: no sum)
    candidates = []
    if spread > 1.0:  # saturated logits: start where they have unit spread, if that is better
        rescaled = params.copy()
        rescaled[:-1] /= spread
        candidates.append(rescaled)
    if start is not None:
        candidates.append(start)
    for candidate in candidates:
        spare = buffers[1] if p is buffers[0] else buffers[0]
        candidate_value = objective.evaluate(candidate, spare)
        if candidate_value < value:
            params, value, p = candidate, candidate_value, spare
    for _ in range(iterations):
        gradient, hessian = objective.newton_system(params, p)
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        if float(np.abs(step).max()) <= 1e-10 * (1.0 + float(np.abs(params).max())):
            break  # converged: a line search would only halve a null step twenty times
        if float(gradient @ step) <= _NEWTON_DECREMENT * (1.0 + abs(value)):
            break  # converged: the Newton decrement g^T H^-1 g is below what float64 resolves in the objective
        length = 1.0
        while length > 1e-6:
            candidate = params - length * step
            candidate_p = buffers[1] if p is buffers[0] else buffers[0]
            candidate_value = objective.evaluate(candidate, candidate_p)
            if candidate_value < value:
                params, value, p = candidate, candidate_value, candidate_p
                break
            length /= 2
        else:
            break
    return params


class _LogisticObjective:
    """The objective of :func:`logistic_calibration`, mean_i [log(1 + e^{z_i}) - y_i z_i] +
    penalty / 2 * ||a||^2 with z = x @ (a, c), x = [features, 1], its probabilities sigmoid(z) and
    its Newton system, on float64 arrays of n entries made once and reused (no temporary of n
    entries per operation).

    The elementwise passes run over spans of :data:`_CALIBRATION_SPAN` entries, each pass reading
    what the previous one left in the cache.  Every element gets the operations that passes over
    whole arrays give it, and every reduction (the mean of the losses, the products with x) is
    taken over whole arrays, so the results have the bits of whole-array passes."""

    def __init__(self, features: np.ndarray, targets: np.ndarray, penalty: float) -> None:
        self.x = np.concatenate([features, np.ones((features.shape[0], 1))], axis=1)
        self.y = targets
        self.n = targets.size
        self.ridge = np.full(self.x.shape[1], penalty)
        self.ridge[-1] = 0.0
        self.regulariser = np.diag(self.ridge) + 1e-12 * np.eye(self.x.shape[1])
        self.z, self.work = np.empty(self.n), np.empty(self.n)
        self.scaled = np.empty(self.x.shape).T  # x.T scaled by the curvature, laid out as x.T * w would be
        self.span = max(1, min(self.n, _CALIBRATION_SPAN))
        self.shrunk, self.term = np.empty(self.span), np.empty(self.span)
        self.nonnegative = np.empty(self.span, dtype=bool)

    def _spans(self) -> Iterator[tuple[int, int]]:
        return ((start, min(start + self.span, self.n)) for start in range(0, self.n, self.span))

    def evaluate(self, params: np.ndarray, probabilities: np.ndarray) -> float:
        """The objective at ``params``; sigmoid(z) is written to ``probabilities`` (n,).  Both come
        from one e = exp(-|z|): the loss max(z, 0) + log1p(e) - y z and the probability
        (1 if z >= 0 else e) / (1 + e)."""
        np.matmul(self.x, params, out=self.z)
        for start, stop in self._spans():
            z, e, t = self.z[start:stop], self.shrunk[: stop - start], self.term[: stop - start]
            loss, p = self.work[start:stop], probabilities[start:stop]
            np.exp(np.negative(np.abs(z, out=e), out=e), out=e)
            np.maximum(z, 0.0, out=loss)
            loss += np.log1p(e, out=t)
            loss -= np.multiply(self.y[start:stop], z, out=t)
            # the numerator without a branch an element: max(e, [z >= 0]), as e <= 1 (a NaN z gives NaN)
            np.maximum(e, np.greater_equal(z, 0.0, out=self.nonnegative[: stop - start]), out=p)
            p /= np.add(1.0, e, out=t)
        return float(self.work.mean() + 0.5 * (self.ridge * params**2).sum())

    def newton_system(self, params: np.ndarray, probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The gradient x^T (p - y) / n + penalty (a, 0) and the Hessian x^T diag(p (1 - p)) x / n +
        diag(penalty, ..., penalty, 0) + 1e-12 I at ``params`` with p = ``probabilities`` (its :meth:`evaluate`)."""
        for start, stop in self._spans():
            p, t = probabilities[start:stop], self.term[: stop - start]
            np.subtract(p, self.y[start:stop], out=self.work[start:stop])
            np.multiply(p, np.subtract(1.0, p, out=t), out=t)
            # one strided pass a column rather than one two-dimensional strided pass
            for column, row in zip(self.x[start:stop].T, self.scaled[:, start:stop]):
                np.multiply(column, t, out=row)
        gradient = self.x.T @ self.work / self.n + self.ridge * params
        return gradient, self.scaled @ self.x / self.n + self.regulariser


def affine_calibration(logits: torch.Tensor, b: torch.Tensor, iterations: int = 8) -> tuple[float, float]:
    """(a, c) minimising the mean cross-entropy of sigmoid(a * logits + c) against b (Newton)."""
    params = logistic_calibration(logits.reshape(-1, 1), b.reshape(-1), iterations)
    return float(params[0]), float(params[1])
