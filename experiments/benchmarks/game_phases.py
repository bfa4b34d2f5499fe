"""Where the time of a BNGP training run goes, and how it grows with K and |Q|.

For each size (K individuals, |Q| attributes, N = K/2 members), one process trains the default
game (``bngp.game.GameConfig()``, arXiv:2410.07414 App. L.8, with the trainer's refits and
defender selection) for ``--steps`` defender steps plus the fresh-attacker check, and reads the
per-phase wall times the trainer records (``summary.timings``, :class:`bngp.timing.PhaseTimer`).
Per phase it reports:

- seconds per call, and the calls of a default run (1,500 steps, a refit every 50 steps, an
  evaluation every 50, a checkpoint every 250, one fresh-attacker check): the projected wall
  time of the default budget is their product summed over phases;
- FLOPs counted from the layer sizes (a Linear layer: 2 * batch * in * out forward, twice that
  backward; f(D) = b Z: 2 * batch * K * |Q|; the ridge refit in float64: the Gram matrix of the
  smaller side, its tridiagonal form (4/3 r^3, more rows than columns) or eigendecomposition
  (~4 r^3), r = min(rows, columns), and the products around it), and the achieved throughput as a fraction of the matmul throughput of this
  machine measured in the same process (float32 for the networks, float64 for the ridge fits);
- the process's peak resident memory (and on a GPU the peak memory torch allocated there);
- the refit's LAPACK decomposition (tridiagonal reduction, or eigendecomposition in the dual form),
  timed as a phase nested in the fit (:mod:`bngp.timing`), against its own bound: half its FLOPs
  are matrix-vector products reading the trailing matrix once per column (r^3 / 6 float64 reads),
  at the matrix-vector bandwidth measured in the same process, the rest at the float64 matmul
  (:func:`decomposition_bound`);
- for the phases that draw random numbers (releases: memberships, G's randomness, the full-rank and
  the fixed Gaussian noise; :func:`phase_draws`), their bound: their products at the matmul plus
  their draws at the rate of the CPU generator measured in the same process
  (:func:`bngp.timing.draw_rates`), and the share of it their products take;
- the references (matmul float32 and float64, matrix-vector bandwidth, the generator's rates) are
  measured at the start of the run and again after every in-game refit
  (:data:`IN_RUN_REPEATS`, outside every timed phase; :func:`measure_one`): a run lasts from
  seconds to 25 minutes and this shared host's speed drifts by a quarter within one, so each
  phase, timed over the whole run, is judged against the median of the run's samples; the
  fractions against the start-of-run references alone are kept beside them;
- where each phase's time goes: after the run, one more round of the game (a refit, the updates, a
  held-out evaluation) with every matrix product torch dispatches recorded by phase, each then
  replayed alone at its shapes, strides and dtype (:mod:`_products`): the time the phase's
  products take at their own sizes, their share of the phase's time (the rest is its other work:
  elementwise passes, draws, the optimiser, Python) and their FLOPs, which for the network phases
  equal the counted ones (a test checks it);
- a verdict on the target ">= 0.5 of the matmul" for the phases whose counted FLOPs are matrix
  products (:data:`MATMUL_BOUND`), at the paper's scale (:data:`PAPER_SCALE`, plain and composed:
  the target asks for the fractions of the default game there); smaller sizes report them
  without a verdict.  A phase that also draws random numbers is judged against its bound (its
  products at the matmul plus its draws at the generator's rate, the least time this machine
  allows it: a composed release's m |Q| normals a draw are 45% of it at paper scale), like the
  decompositions against theirs; both fractions are reported;
- the evaluation attacks, at the sizes of ``--evaluate`` (default: the paper's scale): after the
  run, ``bngp evaluate --attacks all`` (50 releases, the command's processes) of the defender the
  run kept and of a fixed DP defense (:data:`evaluation.DEFAULT_DEFENSE`), each timed with its
  attacks' seconds and AUCs (:func:`_evaluations`), the matmul measured again right after them;
- a table of the speed targets first (:func:`_targets_lines`): each default run against its wall
  time, the paper-scale run's peak memory, the evaluations against 180 s, the matmul-bound phases
  at the paper's scale, the scaling exponents; each beside the same run's matmul, and "not
  measured" for a size the report lacks.  ``--full`` with the default sizes measures them all in
  one command (about an hour on the 2-core CPU).

``--device cuda`` trains on the GPU (:mod:`bngp.device`): the matmul references are then the
GPU's (8192 x 8192 products, torch's float32 matmul precision), and every phase's clock waits for
the GPU's kernels (:class:`bngp.timing.PhaseTimer`).

The per-step time and the refit time are then fitted as c * size^alpha along K (|Q| fixed) and
along |Q| (K fixed): alpha is the scaling exponent.  Populations are independent SNVs
(:func:`bngp.data.independent.simulate_independent`): the timing does not depend on linkage.

A size ``KxQxM`` measures the composition of Table 5 (App. L.6, Theorem 5) instead: M - 1 fixed
Gaussian mechanisms N(0, C / eps^2 I) and the learned one under DPH^{M eps}, eps = 0.3, C as in
``bngp reproduce table5`` (the learned defender and the in-game attacker see the M|Q|-wide release).

Usage::

    OMP_NUM_THREADS=1 python experiments/benchmarks/game_phases.py [--full | --steps 50] [--threads 1] \
        [--sizes 100x1000,200x1000,400x1000,200x500,200x2000,800x5000,800x5000x5] [--evaluate 800x5000 | none] \
        [--out experiments/results/benchmarks]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bngp.device import DEVICE_NAMES
from bngp.timing import draw_rates, matvec_bandwidth

if TYPE_CHECKING:
    import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import (  # noqa: E402
    device_description, linear_flops, matmul_peak_flops, peak_device_memory_gib, peak_helper_memory_gib, peak_memory_gib)
from _products import products_alone, record_products  # noqa: E402
from evaluation import DEFAULT_DEFENSE, PAPER_SCALE_TARGET_SECONDS, timed_evaluation  # noqa: E402

DEFAULT_SIZES = "100x1000,200x1000,400x1000,200x500,200x2000,800x5000,800x5000x5"
#: sizes of the acceptance targets: (K, |Q|, mechanisms composed) -> target wall seconds of a default run.
TARGETS = {(200, 1000, 1): 90.0, (800, 5000, 1): 15 * 60.0, (800, 5000, 5): 30 * 60.0}
#: the peak memory targets of a default run (GiB), by size as :data:`TARGETS`.
MEMORY_TARGETS = {(800, 5000, 1): 4.0}
#: the paper's scale (K, |Q|; App. L.8): the target asks for the phases' fractions of the
#: matmul for the default game at this scale, and its ">= 0.5" is judged there (plain and composed).
#: Smaller sizes report the same fractions without a verdict: there a 128-release update's products
#: take about a third of its time, and its other work (elementwise passes, draws, the optimiser, the
#: logits' recalibration, Python's dispatch) does not shrink with them.
PAPER_SCALE = (800, 5000)
#: the sizes whose trained defender is also evaluated by default (``--evaluate``), and the releases.
DEFAULT_EVALUATE = "800x5000"
EVALUATION_RELEASES = 50
#: the per-mechanism eps of the composed sizes (one of Table 5's rows).
COMPOSED_EPSILON = 0.3
#: the phases whose counted FLOPs are matrix products (the networks' layers, f(D) = b Z, the refit's
#: Gram matrix and maps; its decomposition, timed apart, is judged against its own bound) and the
#: fraction of the same run's matmul they must reach.  Not the defender selection: right after a
#: refit the attacker scores its 500 validation draws by its linear head alone (4 GFLOP at paper
#: scale, 0.03 s at the matmul), and the phase's time is the affine recalibration of their 400,000
#: logits by Newton steps (``bngp.game.objectives.leakage``), which is not a matrix product.
MATMUL_BOUND = ("refit: releases", "refit: fit", "attacker steps", "defender step", "held-out evaluation")
MATMUL_TARGET = 0.5
PHASES = ("refit: releases", "refit: fit", "selection", "attacker steps", "defender step", "held-out evaluation",
          "checkpoint", "fresh-attacker check")
#: the LAPACK decompositions inside the ridge fits, timed as phases nested in theirs (:mod:`bngp.timing`):
#: half of their FLOPs are matrix-vector products, bound by memory bandwidth, judged against their own bound.
DECOMPOSITIONS = ("tridiagonal reduction", "eigendecomposition")
#: timed products (or draws) per reference sampled after each in-game refit: about 4 s a sample on
#: the 2-core CPU (the start-of-run references take the helpers' defaults, about 12 s).
IN_RUN_REPEATS = 2
#: the keys of one sample of the references (:func:`references`), as the records store them.
REFERENCE_KEYS = ("matmul_gflops_float32", "matmul_gflops_float64", "matvec_gbytes_per_second",
                  "normals_per_second", "uniforms_per_second")


def _is_decomposition(name: str) -> bool:
    """Whether the phase ``name`` ("outer / inner") is a decomposition timed inside its fit."""
    return name.split(" / ")[-1] in DECOMPOSITIONS


def default_calls(config) -> dict[str, float]:
    """Calls of each phase in a run of ``config`` (its own steps and schedule)."""
    refits = config.steps / config.attacker.refit_every + 2  # the schedule, the final scoring, a restore
    return {
        "refit: releases": refits,
        "refit: fit": refits,
        "selection": refits - 1,
        "attacker steps": config.steps,
        "defender step": config.steps,
        "held-out evaluation": config.steps / config.eval_every,
        "checkpoint": config.steps / config.checkpoint_every + 1,
        "fresh-attacker check": 1.0 if config.fresh_check.steps else 0.0,
    }


def _refit_fit_flops(rows: int, columns: int, outputs: int, validation: int, path: int) -> float:
    """FLOPs of one in-game refit's fit (``bngp.linear.fit_ridge`` with validation draws, then the
    population-inversion head), from the products it runs.  With more rows than columns (the
    primal form, :func:`bngp.linear.symmetric_form` on the CPU): the Gram matrix X^T X by syrk (half
    a general product), its Householder tridiagonalisation (4/3 r^3), X^T B, the reflectors applied
    to X^T B, X_v^T and the chosen map (2 r^2 per column), the shifted tridiagonal solves (O(r) per
    column, not counted); with fewer (the dual form) the Gram matrix of the rows, its
    eigendecomposition (~4 r^3), U^T B, the validation kernel X_v X^T and the map X^T (U ...);
    r = min(rows, columns); then the validation predictions along the path and the inversion
    head's features (each release through the K x |Q| inverse)."""
    r = min(rows, columns)
    decomposed = _decomposition(rows, columns)[2]
    if rows > columns:
        ridge = rows * columns**2 + decomposed + 2.0 * rows * columns * outputs + 2.0 * r**2 * (2 * outputs + validation)
    else:
        ridge = columns * rows**2 + decomposed + 2.0 * rows * r * outputs + 2.0 * validation * columns * rows \
            + 2.0 * validation * rows * r + 2.0 * rows * r * outputs + 2.0 * columns * rows * outputs
    return ridge + path * 2.0 * validation * r * outputs + 2.0 * rows * columns * outputs


def _decomposition(rows: int, columns: int) -> tuple[str, float, float]:
    """The decomposition a refit's fit runs, its order r and its FLOPs: with more rows than columns
    the tridiagonal reduction of the columns' Gram matrix (4/3 r^3), else the eigendecomposition of
    the rows' (~4 r^3), r = min(rows, columns)."""
    if rows > columns:
        return "tridiagonal reduction", float(columns), 4.0 / 3.0 * columns**3
    order = float(min(rows, columns))
    return "eigendecomposition", order, 4.0 * order**3


def decomposition_bound(name: str, order: float, peak64: float, bandwidth: float) -> float:
    """Seconds a float64 decomposition of order r cannot beat on this machine: its symmetric
    matrix-vector products read the trailing matrix once per column (r^3 / 6 float64 reads) at
    the measured matrix-vector bandwidth, and its matrix-matrix parts run at the float64 matmul
    peak: the rank-2k updates of the reduction (2/3 r^3 FLOPs), plus for the eigendecomposition
    the back-transformation of the eigenvectors (2 r^3; divide and conquer's products, which
    deflation makes data dependent, are not counted, so the bound is if anything too low)."""
    products = 2.0 / 3.0 * order**3 + (2.0 * order**3 if name == "eigendecomposition" else 0.0)
    return order**3 / 6.0 * 8.0 / bandwidth + products / peak64


def phase_flops(game, refit_rows: int) -> dict[str, float]:
    """FLOPs of one call of each phase, counted from the layer sizes (module docstring).

    An attacker update runs H forward, the weight gradients of the layers Adam trains (not the
    refitted head's) and the input gradients inside the MLP (not into the release); the defender
    step runs G forward and back (no input gradient for the layers fed (b, r) itself: G's first
    and its linear skip), and H forward and its input gradients only (H is held fixed).  The
    counts equal the FLOPs of the products these phases dispatch (a test records them).
    A composed game whose attacker reads the fixed copies pooled (``AttackerSettings.pool_copies``) fits
    its head on that 2|Q|-wide input (on as many releases as for the whole release)."""
    import torch

    from bngp.game.config import REFIT_VALIDATION_DRAWS
    from bngp.linear import RIDGE_PATH

    config = game.config
    batch = config.batch_size
    per_sample_defender = linear_flops(game.defender, 1)
    # the layers of G fed (b, r) itself form no input gradient
    fed_data = linear_flops(game.defender.net[0], 1) + (linear_flops(game.defender.skip, 1) if game.defender.skip is not None else 0.0)
    attacker = game.attacker
    per_sample_attacker = linear_flops(attacker, 1)
    net = linear_flops(attacker.net, 1) if hasattr(attacker, "net") else per_sample_attacker
    head = getattr(attacker, "head", None)
    first = next((2.0 * m.in_features * m.out_features for m in attacker.modules() if isinstance(m, torch.nn.Linear)), 0.0)
    # f(D) once per release, whatever the composition (its parts share the statistic)
    statistic = 2.0 * game.population.n_individuals * game.population.n_attributes
    release = per_sample_defender + statistic
    validation = REFIT_VALIDATION_DRAWS
    decomposition, _, decomposed = _decomposition(refit_rows, game.attacker_spec.n_outputs)
    return {
        "refit: releases": (refit_rows + validation) * release,
        # the fit's own products; its decomposition is a phase nested in it (bngp.timing, bngp.linear)
        "refit: fit": _refit_fit_flops(refit_rows, game.attacker_spec.n_outputs, game.population.n_individuals, validation,
                                       len(RIDGE_PATH)) - decomposed,
        f"refit: fit / {decomposition}": decomposed,
        # right after a refit the K-output attacker's MLP is silent (its last layer is zero): it scores
        # the validation draws by its linear head alone (bngp.attacks.network.Attacker.forward)
        "selection": validation * (linear_flops(head, 1) if head is not None else per_sample_attacker),
        "attacker steps": config.attacker.steps * batch * (release + per_sample_attacker + 2.0 * net - first),
        "defender step": batch * (3 * per_sample_defender - fed_data + statistic + 2 * per_sample_attacker),
        "held-out evaluation": config.eval_batch * (release + per_sample_attacker),
    }


def phase_draws(game, refit_rows: int) -> dict[str, tuple[float, float]]:
    """(standard normals, uniforms) one call of each phase draws, counted from the game's settings.

    A release draws its membership (K uniform keys, or K Bernoulli uniforms), G's q uniforms and
    its |Q| full-rank normals, and m |Q| normals for the m fixed Gaussian blocks of a composed
    release; the held-out evaluation's memberships and G's randomness are drawn once, its fixed
    blocks again each time."""
    from bngp.game.config import REFIT_VALIDATION_DRAWS

    config, spec = game.config, game.defender.spec
    fixed = len(config.defender.fixed_gaussian_sigmas) * spec.n_outputs
    normals = fixed + (spec.n_outputs if spec.full_rank_noise else 0)
    uniforms = game.population.n_individuals + spec.noise_dim
    batch = config.batch_size
    return {
        "refit: releases": ((refit_rows + REFIT_VALIDATION_DRAWS) * normals, (refit_rows + REFIT_VALIDATION_DRAWS) * uniforms),
        "attacker steps": (config.attacker.steps * batch * normals, config.attacker.steps * batch * uniforms),
        "defender step": (batch * normals, batch * uniforms),
        "held-out evaluation": (config.eval_batch * fixed, 0.0),
    }


def draw_bound(products_seconds: float, draws: tuple[float, float], rates: tuple[float, float]) -> float:
    """A phase's bound in seconds: its products at the matmul (``products_seconds``) plus its draws
    (normals, uniforms) at the generator's ``rates`` (normals, uniforms per second)."""
    return products_seconds + draws[0] / rates[0] + draws[1] / rates[1]


def composed_settings(population, members: int, composition: int) -> dict:
    """GameConfig settings of Table 5's composition of ``composition`` mechanisms at eps =
    :data:`COMPOSED_EPSILON` (as ``bngp reproduce table5`` sets them)."""
    from bngp.reproduce.catalog import MU_PER_EPSILON
    from bngp.reproduce.experiment import typical_replacement_l2

    sigma = typical_replacement_l2(population, members) / MU_PER_EPSILON / COMPOSED_EPSILON
    return {"dp_epsilon": composition * COMPOSED_EPSILON, "fixed_gaussian_sigmas": (sigma,) * (composition - 1)}


def _game(individuals: int, attributes: int, composition: int, seed: int, steps: int | None, fresh_check_steps: int,
          overrides: dict[str, int | float] | None, device: "str | torch.device" = "cpu"):
    """The default game of one size (module docstring), untrained."""
    from bngp.data.independent import simulate_independent
    from bngp.data.priors import UniformSubsetPrior
    from bngp.game import Game, GameConfig

    population = simulate_independent(individuals, individuals, attributes, seed=seed)
    members = individuals // 2
    composed = composed_settings(population, members, composition) if composition > 1 else {}
    budget = {} if steps is None else {"steps": steps}
    config = GameConfig.from_flat({"kappa": 1.5, "fresh_check_steps": fresh_check_steps, "seed": seed, **budget, **composed,
                                   **(overrides or {})})
    return Game(population, UniformSubsetPrior(individuals, members), config, device=device)


def _add_flops(phases: dict, flops: dict[str, float], peak32: float, peak64: float, bandwidth: float | None,
               order: float, draws: dict[str, tuple[float, float]] | None = None,
               rates: tuple[float, float] | None = None) -> None:
    """Per phase with a FLOP count: GFLOP per call, GFLOP/s and the fraction of the matmul peak
    (float64 for the ridge fit, float32 for the rest); for the refit's decomposition (nested in
    the fit), the fraction of its own bound (:func:`decomposition_bound`, order ``order``) at the
    measured float64 matmul and matrix-vector ``bandwidth`` (bytes/s); for a phase that also draws
    random numbers (``draws``: normals and uniforms a call), its bound: its products at the
    matmul peak plus its draws at the generator's measured ``rates`` (normals, uniforms per
    second), the share of that bound its products take, and the fraction of the bound it reaches.
    A decomposition that was not timed apart (on a GPU, or in a record made before it was) counts
    in its fit's FLOPs."""
    flops = dict(flops)
    for name in [name for name in flops if " / " in name]:
        if name not in phases:
            flops[name.split(" / ")[0]] += flops.pop(name)
    for name, phase in phases.items():
        if name in flops:
            gflops = flops[name] / phase["seconds_per_call"] / 1e9
            peak = peak64 if name.startswith("refit: fit") else peak32
            phase.update(gflop_per_call=flops[name] / 1e9, gflops=gflops, fraction_of_matmul=gflops * 1e9 / peak)
            if _is_decomposition(name) and bandwidth:
                bound = decomposition_bound(name.split(" / ")[-1], order, peak64, bandwidth)
                phase.update(bound_seconds=bound, fraction_of_bound=bound / phase["seconds_per_call"])
            if draws and rates and name in draws and any(draws[name]):
                normals, uniforms = draws[name]
                products = flops[name] / peak
                bound = draw_bound(products, draws[name], rates)
                phase.update(normals_per_call=normals, uniforms_per_call=uniforms, bound_seconds=bound,
                             products_share_of_bound=products / bound, fraction_of_bound=bound / phase["seconds_per_call"])


def references(where: "torch.device", repeats: int | None = None) -> dict[str, float | None]:
    """The yardsticks measured now (:data:`REFERENCE_KEYS`): the float32 and float64 matmul of
    ``where`` (GFLOP/s), the CPU's matrix-vector bandwidth (GB/s; None on a GPU) and the CPU
    generator's normals and uniforms a second (the games draw there whatever the device,
    :mod:`bngp.rng`); ``repeats`` timed products or draws each (None: the helpers' defaults)."""
    import torch

    more = {} if repeats is None else {"repeats": repeats}
    peak32 = matmul_peak_flops(device=where, **more)
    peak64 = matmul_peak_flops(dtype=torch.float64, device=where, **more)
    bandwidth = matvec_bandwidth(**more) if where.type == "cpu" else None
    normals, uniforms = draw_rates(**({} if repeats is None else {"repeats": max(1, repeats // 2)}))
    return {"matmul_gflops_float32": peak32 / 1e9, "matmul_gflops_float64": peak64 / 1e9,
            "matvec_gbytes_per_second": None if bandwidth is None else bandwidth / 1e9,
            "normals_per_second": normals, "uniforms_per_second": uniforms}


def run_references(record: dict) -> dict[str, float | None]:
    """The references a record's phases are judged against: per key, the median of its start-of-run
    value and its in-run samples (``in_run_references``; the start-of-run value alone in a record
    made before they were sampled)."""
    samples = [{key: record.get(key) for key in REFERENCE_KEYS}, *record.get("in_run_references", [])]
    return {key: None if samples[0][key] is None else float(np.median([sample[key] for sample in samples]))
            for key in REFERENCE_KEYS}


def _sample_after_refits(game, where: "torch.device", samples: list[dict], seconds: list[float]) -> None:
    """Make ``game`` sample the references (:data:`IN_RUN_REPEATS`) into ``samples`` after each of
    its in-game refits, adding the time it takes to ``seconds[0]``: outside every timed phase (the
    trainer times a refit's parts inside ``refit_attacker``, and nothing around it)."""
    refit = game.refits.refit_attacker

    def refit_then_sample(*args, **kwargs):
        refit(*args, **kwargs)
        started = time.perf_counter()
        samples.append(references(where, IN_RUN_REPEATS))
        seconds[0] += time.perf_counter() - started

    game.refits.refit_attacker = refit_then_sample


def _flops_against(phases: dict, counts: tuple[dict, float, dict], refs: dict[str, float | None]) -> None:
    """:func:`_add_flops` of ``phases`` against the references ``refs`` (:data:`REFERENCE_KEYS`), with
    ``counts`` = (FLOPs per phase, the decomposition's order, draws per phase) of the game."""
    bandwidth = refs.get("matvec_gbytes_per_second")
    rates = None if refs.get("normals_per_second") is None else (refs["normals_per_second"], refs["uniforms_per_second"])
    flops, order, draws = counts
    _add_flops(phases, flops, refs["matmul_gflops_float32"] * 1e9, refs["matmul_gflops_float64"] * 1e9,
               None if bandwidth is None else bandwidth * 1e9, order, draws, rates)


def _judge(record: dict, game) -> None:
    """Fill the FLOP columns of ``record``'s phases against the run's references
    (:func:`run_references`), and keep each judged fraction against the start-of-run references
    alone as ``at_start``."""
    rows = record["refit_rows"]
    counts = (phase_flops(game, rows), _decomposition(rows, game.attacker_spec.n_outputs)[1], phase_draws(game, rows))
    start = {key: record.get(key) for key in REFERENCE_KEYS}
    alone = {name: {"seconds_per_call": phase["seconds_per_call"]} for name, phase in record["phases"].items()}
    _flops_against(alone, counts, start)
    refs = run_references(record)
    _flops_against(record["phases"], counts, refs)
    for name, products in record.get("products_alone", {}).items():
        phase = record["phases"].get(name)
        if phase is None or not products["products_seconds_per_call"]:
            continue
        peak = refs["matmul_gflops_float64" if name.startswith("refit: fit") else "matmul_gflops_float32"]
        phase["products_alone"] = {
            **products,
            "share_of_phase": products["products_seconds_per_call"] / phase["seconds_per_call"],
            "fraction_of_matmul": products["products_gflop_per_call"] / products["products_seconds_per_call"] / peak,
        }
    for name, phase in record["phases"].items():
        phase.pop("at_start", None)
        kept = {key: alone[name][key] for key in ("fraction_of_matmul", "fraction_of_bound") if key in alone[name]}
        if kept:
            phase["at_start"] = kept


def measure_one(individuals: int, attributes: int, steps: int | None, fresh_check_steps: int, threads: int, seed: int,
                overrides: dict[str, int | float] | None = None, composition: int = 1, device: str = "cpu",
                evaluate: bool = False) -> dict:
    """Train one size in this process and return its phase record; ``steps`` None trains the
    default run itself (its budget and any early stop) and reports its own calls.  The references
    (:func:`references`) are measured before the game and after each of its refits
    (:func:`_sample_after_refits`); the phases are judged against their medians (:func:`_judge`).
    ``evaluate``: then the evaluation attacks (:func:`_evaluations`), after the training's peak
    memory is read."""
    from bngp.game import GameConfig
    from bngp.linear import default_shadow_releases
    from bngp.device import resolve_device
    from bngp.threads import set_threads

    set_threads(threads)
    where = resolve_device(device)
    start = references(where)
    game = _game(individuals, attributes, composition, seed, steps, fresh_check_steps, overrides, where)
    samples: list[dict] = []
    sampling = [0.0]
    _sample_after_refits(game, where, samples, sampling)
    config, members = game.config, individuals // 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        summary = game.train(Path(work) / "run", progress=False)
        wall = time.perf_counter() - started
        training_peak = peak_memory_gib()  # the process's high-water mark: read before any evaluation
        evaluations = _evaluations(game, Path(work) / "run", seed, where) if evaluate else []
    refit_rows = config.attacker.refit_releases or default_shadow_releases(individuals, game.mechanism.n_outputs)
    full = steps is None  # the default run itself: its calls are the default run's, whatever its stop
    budget_calls = None if full else default_calls(GameConfig.from_flat(overrides or {}))
    phases = {}
    timings = summary.timings
    order = [name for name in PHASES if name in timings]
    order += [name for name in timings if name not in order]  # the nested phases, after theirs
    for name in order:
        timing = timings[name]
        per_call = timing["seconds"] / timing["calls"]
        parent = name.split(" / ")[0]
        # a nested phase runs as often per call of its parent as it did in the measured steps
        calls = timing["calls"] if full else budget_calls[parent] * timing["calls"] / timings[parent]["calls"]
        phases[name] = {"seconds": timing["seconds"], "calls": timing["calls"], "seconds_per_call": per_call,
                        "default_calls": calls, "default_seconds": per_call * calls}
    record = {
        "individuals": individuals,
        "attributes": attributes,
        "composition": composition,
        "fixed_gaussian_sigmas": list(config.defender.fixed_gaussian_sigmas),
        "dp_epsilon": config.objective.dp_epsilon,
        "members": members,
        "steps": summary.steps,
        "full_default_run": full,
        "selected_step": None if summary.selected is None else summary.selected["step"],
        "early_stop": summary.early_stop,
        "fresh_check_steps": fresh_check_steps,
        "refit_rows": refit_rows,
        "threads": threads,
        "device": device_description(where),
        **start,  # the references at the start of the run
        "in_run_references": samples,
        "in_run_sampling_seconds": sampling[0],
        "wall_seconds": wall,
        "projected_default_seconds": sum(p["default_seconds"] for p in phases.values()),
        "peak_memory_gib": training_peak,
        "peak_device_memory_gib": peak_device_memory_gib(where),
        "phases": phases,
        "in_game_auc": summary.in_game_auc,
        "strongest_fresh_auc": summary.strongest_fresh_auc,
        "utility_loss": summary.utility_loss,
        "seed": seed,
        "overrides": overrides or {},
    }
    if evaluate:
        record["evaluations"] = evaluations
        record["evaluation_references"] = references(where, IN_RUN_REPEATS)
    record["products_alone"] = _products_of_a_round(game)
    _judge(record, game)
    return record


def _evaluations(game, run_dir: Path, seed: int, where: "torch.device") -> list[dict]:
    """The evaluation attacks, as a user runs them after training: ``bngp evaluate --attacks all``
    (:data:`EVALUATION_RELEASES` releases, the command's processes for this size,
    :func:`bngp.workers.resolve_workers`) of the defender the run kept (``--defense run:DIR``), then
    of :data:`evaluation.DEFAULT_DEFENSE`, the fixed DP defense of ``evaluation.py``, whose releases
    keep a weak signal; each with its wall time, its attacks' seconds and AUCs, and the process's
    peak memory after it (a high-water mark, the trained game still held)."""
    from bngp.defenses.registry import DefenseContext, parse_defense_spec
    from bngp.defenses.trained import load_run_defense
    from bngp.workers import resolve_workers

    population, members = game.population, int(round(game.n_members))
    context = DefenseContext(population, members)
    workers = resolve_workers("auto", population.n_individuals * population.n_attributes)
    out = []
    for spec, defense in (("run (the defender the run kept)", load_run_defense(run_dir, context)),
                          (DEFAULT_DEFENSE, parse_defense_spec(DEFAULT_DEFENSE, context))):
        timed = timed_evaluation(population, game.prior, members, defense, EVALUATION_RELEASES, seed, where, workers)
        out.append({"defense": spec, "releases": EVALUATION_RELEASES, **timed, "peak_memory_gib": peak_memory_gib(),
                    "peak_helper_memory_gib": peak_helper_memory_gib()})
    return out


def _products_of_a_round(game) -> dict[str, dict[str, float]]:
    """After the run: the matrix products of one more round of ``game`` (:func:`_record_a_round`)
    replayed alone in this process (:mod:`_products`); per phase, per call: how many, their GFLOP
    and their seconds alone.  Outside the run's timings, which are read before."""
    return products_alone(*_record_a_round(game))


def _record_a_round(game) -> tuple[dict, dict[str, int]]:
    """One more round of ``game`` (a refit with its selection scoring, the attacker's updates and
    the defender's, a held-out evaluation) with its matrix products recorded by phase
    (:func:`_products.record_products`), and how often each phase ran in it."""
    game.refits.__dict__.pop("refit_attacker", None)  # the run's wrapper sampled the references after each refit
    every = game.config.attacker.refit_every
    if every:
        game.step = (game.step // every + 1) * every  # the next step refits
    before = dict(game.timer.calls)

    def one_round() -> None:
        game.training_step()
        with game.timer("held-out evaluation"):
            game.evaluate_heldout()

    recorded = record_products(one_round)
    return recorded, {name: game.timer.calls[name] - before.get(name, 0) for name in game.timer.calls}


def _exponent(sizes: list[float], seconds: list[float]) -> float | None:
    """alpha of seconds ~ c * size^alpha (least squares on logs); None with fewer than 3 sizes."""
    if len(sizes) < 3:
        return None
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def scaling(records: list[dict]) -> dict:
    """Exponents of the per-step and per-refit times along K (|Q| = 1000) and along |Q| (K = 200)."""
    out = {}
    for axis, fixed_key, fixed, key in (("K", "attributes", 1000, "individuals"), ("|Q|", "individuals", 200, "attributes")):
        rows = sorted((r for r in records if r[fixed_key] == fixed and r.get("composition", 1) == 1), key=lambda r: r[key])
        sizes = [r[key] for r in rows]
        step = [(r["phases"]["attacker steps"]["seconds_per_call"] + r["phases"]["defender step"]["seconds_per_call"])
                for r in rows]
        refit = [r["phases"]["refit: releases"]["seconds_per_call"] + r["phases"]["refit: fit"]["seconds_per_call"]
                 for r in rows]
        out[axis] = {"sizes": sizes, "step_seconds": step, "refit_seconds": refit,
                     "step_exponent": _exponent(sizes, step), "refit_exponent": _exponent(sizes, refit)}
    return out


def _stop(record: dict) -> str:
    """Where the default run stopped and what it kept (runs of the whole default budget only)."""
    if not record.get("full_default_run"):
        return ""
    stop = record.get("early_stop")
    kept = f", kept the state of step {record['selected_step']}"
    return (f", stopped by the selection patience {stop['patience']} of a {stop['steps']}-step budget" if stop else
            ", the whole budget") + kept


def _device_memory(record: dict) -> str:
    """`` (GPU: x GiB)`` for a run on a GPU, empty on the CPU."""
    gib = record.get("peak_device_memory_gib") or 0.0
    return f" (GPU: {gib:.2f} GiB allocated)" if gib else ""


def _judged(phase: dict) -> tuple[float, str]:
    """The fraction a phase is judged by, and how it reads: a phase that draws random numbers
    against its bound (its products at the matmul plus its draws at the generator's rate: the
    least time this machine allows it), any other against the matmul alone."""
    if "products_share_of_bound" in phase:
        return phase["fraction_of_bound"], (f"{phase['fraction_of_bound']:.2f} of its bound "
                                            f"({phase['fraction_of_matmul']:.2f} of the matmul)")
    return phase["fraction_of_matmul"], f"{phase['fraction_of_matmul']:.2f}"


def is_paper_scale(record: dict) -> bool:
    """Whether ``record`` measured the paper's scale (:data:`PAPER_SCALE`), composed or not."""
    return (record.get("individuals"), record.get("attributes")) == PAPER_SCALE


def lowest_matmul_bound(record: dict) -> tuple[str, float, str] | None:
    """The matmul-bound phase of ``record`` with the lowest judged fraction (:func:`_judged`): its
    name, fraction and how it reads; None when none was timed."""
    judged = {name: _judged(phase) for name, phase in record["phases"].items()
              if name in MATMUL_BOUND and "fraction_of_matmul" in phase}
    if not judged:
        return None
    lowest = min(judged, key=lambda name: judged[name][0])
    return lowest, *judged[lowest]


def _matmul_verdict(record: dict) -> str:
    """The lines on the target: each matmul-bound phase's fraction (of its bound for a phase that
    draws, :func:`_judged`), the lowest, met or not at the paper's scale (:data:`PAPER_SCALE`),
    reported without a verdict below it; then, for each phase under the target, the share of its
    time its products take alone, and for each phase whose draws take a tenth of its bound or
    more, what its bound is made of."""
    phases = {name: phase for name, phase in record["phases"].items()
              if name in MATMUL_BOUND and "fraction_of_matmul" in phase}
    if not phases:
        return "Matmul-bound phases: none timed."
    judged = {name: _judged(phase) for name, phase in phases.items()}
    lowest, fraction, text = lowest_matmul_bound(record)
    sampled = bool(record.get("in_run_references"))
    against = "the run's references (the medians above)" if sampled else "the same run's matmul"
    verdict = (f"**{'met' if fraction >= MATMUL_TARGET else 'NOT met'}**" if is_paper_scale(record) else
               f"reported, not judged (the target is judged at the paper's scale, K = {PAPER_SCALE[0]}, "
               f"|Q| = {PAPER_SCALE[1]})")
    lines = [f"Matmul-bound phases (target >= {MATMUL_TARGET} of {against}; a phase that draws random "
             "numbers, of its bound: its products at the matmul plus its draws at the generator's rate): "
             + ", ".join(f"{name} {text}" for name, (_, text) in judged.items())
             + f"; lowest {lowest} {text}: {verdict}."]
    at_start = {name: phase["at_start"].get("fraction_of_bound", phase["at_start"].get("fraction_of_matmul"))
                for name, phase in phases.items() if "at_start" in phase}
    if sampled and at_start and is_paper_scale(record):
        first = min(at_start, key=at_start.get)
        lines.append(f"Against the start-of-run references alone: lowest {first} {at_start[first]:.2f}: "
                     f"{'met' if at_start[first] >= MATMUL_TARGET else 'NOT met'}.")
    for name, (fraction, _) in judged.items():
        alone = phases[name].get("products_alone")
        if fraction < MATMUL_TARGET and alone:
            lines.append(
                f"{name}: its products alone (replayed at their shapes) take {alone['share_of_phase']:.0%} of its time, "
                f"at {alone['fraction_of_matmul']:.2f} of the matmul; the rest, {1 - alone['share_of_phase']:.0%}, is its "
                "other work.")
    refs = run_references(record) if "matmul_gflops_float32" in record else record
    for name, phase in phases.items():
        if phase.get("products_share_of_bound", 1.0) <= 0.9:
            lines.append(
                f"{name}: {phase['normals_per_call'] / 1e6:.1f} M standard normals and "
                f"{phase['uniforms_per_call'] / 1e6:.1f} M uniforms a call at the generator's rate measured in the same "
                f"process ({refs['normals_per_second'] / 1e6:.0f} M and {refs['uniforms_per_second'] / 1e6:.0f} M a "
                f"second) take {1 - phase['products_share_of_bound']:.0%} of its bound of {phase['bound_seconds']:.2f} s.")
    return "\n".join(lines)


def _references_line(record: dict) -> str:
    """``matmul ... GFLOP/s (float32), ... (float64)``: at the start of the run, and with in-run
    samples the medians judged by and their ranges, and the seconds the sampling took."""
    line = (f"matmul {record['matmul_gflops_float32']:.1f} GFLOP/s (float32), {record['matmul_gflops_float64']:.1f} "
            "(float64)")
    samples = record.get("in_run_references")
    if not samples:
        return line
    refs = run_references(record)

    def spread(key: str) -> str:
        values = [record[key], *(sample[key] for sample in samples)]
        return f"{refs[key]:.1f} ({min(values):.1f}-{max(values):.1f})"

    bandwidth = "" if refs["matvec_gbytes_per_second"] is None else (
        f", matrix-vector {spread('matvec_gbytes_per_second')} GB/s")
    return (f"{line} at the start; judged against the medians of the start and {len(samples)} samples after the "
            f"refits: matmul {spread('matmul_gflops_float32')} and {spread('matmul_gflops_float64')}{bandwidth}, "
            f"{refs['normals_per_second'] / 1e6:.0f} M normals a second (sampling {record['in_run_sampling_seconds']:.0f} s, "
            "in no phase)")


def _decomposition_lines(record: dict) -> list[str]:
    """A line per timed decomposition: its time per call against its bound on this machine."""
    bandwidth = run_references(record)["matvec_gbytes_per_second"]
    lines = []
    for name, phase in record["phases"].items():
        if "fraction_of_bound" in phase and _is_decomposition(name):
            lines.append(
                f"{name}: {phase['seconds_per_call']:.2f} s a call against a bound of {phase['bound_seconds']:.2f} s, "
                f"**{phase['fraction_of_bound']:.2f} of its bound** (half its FLOPs are matrix-vector products reading "
                f"the trailing matrix once per column, r^3 / 6 float64 reads at the matrix-vector bandwidth measured "
                f"in the same process, {bandwidth:.1f} GB/s; the rest at the float64 matmul; `decomposition_bound`).")
    return lines


def _products_lines(record: dict) -> list[str]:
    """The table of the phases' products replayed alone (:func:`_products_of_a_round`), if measured."""
    phases = {name: phase for name, phase in record["phases"].items() if "products_alone" in phase}
    if not phases:
        return []
    lines = [
        "Products alone: after the run, one more round (a refit, the updates, a held-out evaluation) with every "
        "matrix product torch dispatched recorded by phase, each replayed alone at its shapes, strides and dtype in "
        "the same process, timed in a loop (`experiments/benchmarks/_products.py`); the rest of a phase's time is its "
        "other work. The ridge fit's LAPACK and numpy products are not torch's and are not seen.",
        "",
        "| phase | products / call | GFLOP seen / call | GFLOP counted | alone (s / call) | share of the phase | alone, of peak |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, phase in phases.items():
        alone = phase["products_alone"]
        counted = f"{phase['gflop_per_call']:.3g}" if "gflop_per_call" in phase else "-"
        lines.append(f"| {name} | {alone['products_per_call']:.0f} | {alone['products_gflop_per_call']:.3g} | {counted} | "
                     f"{alone['products_seconds_per_call']:.4f} | {alone['share_of_phase']:.0%} | "
                     f"{alone['fraction_of_matmul']:.2f} |")
    return lines + [""]


def _size_name(record: dict) -> str:
    """``K x |Q|`` (``x M composed``) of a record."""
    composition = record.get("composition", 1)
    return f"{record['individuals']} x {record['attributes']}" + ("" if composition == 1 else f", {composition} composed")


def _evaluation_lines(record: dict) -> list[str]:
    """The evaluation attacks of the record's trained defender and of the fixed defense, if measured."""
    evaluations = record.get("evaluations")
    if not evaluations:
        return []
    refs = record["evaluation_references"]
    lines = [f"Evaluation attacks (`bngp evaluate --attacks all`, {evaluations[0]['releases']} releases, "
             f"{evaluations[0]['workers']} process(es), after the run; matmul {refs['matmul_gflops_float32']:.1f} "
             "GFLOP/s (float32) measured right after them):", "",
             "| defense | wall (s) | slowest attacks (s, AUC) | strongest AUC | peak memory so far |", "|---|---|---|---|---|"]
    for entry in evaluations:
        attacks = sorted(entry["attacks"].items(), key=lambda item: -item[1]["seconds"])
        slowest = ", ".join(f"{name} {value['seconds']:.1f} ({value['auc']:.3f})" for name, value in attacks[:3])
        strongest = max(entry["attacks"].items(), key=lambda item: item[1]["auc"])
        lines.append(f"| {entry['defense']} | {entry['wall_seconds']:.1f} | {slowest} | {strongest[0]} "
                     f"{strongest[1]['auc']:.3f} | {entry['peak_memory_gib']:.2f} GiB |")
    return lines + [""]


def _targets_lines(report: dict) -> list[str]:
    """The speed targets, each with what this report measured and the same run's float32 matmul
    (the median the run's phases are judged against), or "not measured" when the report lacks its
    size; on a GPU the targets (the 2-core CPU's) are shown without a verdict."""
    records = {(r["individuals"], r["attributes"], r.get("composition", 1)): r for r in report["records"]}
    on_cpu = report.get("device", "cpu") == "cpu"

    def verdict(ok: bool) -> str:
        return ("met" if ok else "**NOT met**") if on_cpu else "(a CPU target)"

    def matmul(record: dict) -> str:
        return f"{run_references(record)['matmul_gflops_float32']:.1f}"

    rows = []
    for size, target in TARGETS.items():
        record = records.get(size)
        name = f"default run, K x |Q| = {size[0]} x {size[1]}" + ("" if size[2] == 1 else f", composition of {size[2]}")
        if record is None or not record.get("full_default_run"):
            rows.append(f"| {name} | <= {target:.0f} s | not measured (needs `--full` and this size) | - | - |")
            continue
        seconds = record["projected_default_seconds"]
        rows.append(f"| {name} | <= {target:.0f} s | {seconds:.0f} s | {matmul(record)} | {verdict(seconds <= target)} |")
        if size in MEMORY_TARGETS:
            gib = record["peak_memory_gib"]
            rows.append(f"| its peak memory | <= {MEMORY_TARGETS[size]:.0f} GiB | {gib:.2f} GiB | - | "
                        f"{verdict(gib <= MEMORY_TARGETS[size])} |")
    paper = records.get((*PAPER_SCALE, 1))
    if paper is None or not paper.get("evaluations"):
        rows.append(f"| `bngp evaluate --attacks all`, {EVALUATION_RELEASES} releases, {PAPER_SCALE[0]} x {PAPER_SCALE[1]} | "
                    f"<= {PAPER_SCALE_TARGET_SECONDS:.0f} s | not measured (needs this size in `--evaluate`) | - | - |")
    for entry in (paper or {}).get("evaluations", []):
        wall = entry["wall_seconds"]
        rows.append(f"| `bngp evaluate --attacks all`, {entry['releases']} releases, {PAPER_SCALE[0]} x {PAPER_SCALE[1]}, "
                    f"{entry['defense']} | <= {PAPER_SCALE_TARGET_SECONDS:.0f} s | {wall:.0f} s | "
                    f"{paper['evaluation_references']['matmul_gflops_float32']:.1f} | {verdict(wall <= PAPER_SCALE_TARGET_SECONDS)} |")
    judged = [(record, lowest_matmul_bound(record)) for record in report["records"] if is_paper_scale(record)]
    judged = [(record, lowest) for record, lowest in judged if lowest is not None]
    if not judged:
        rows.append(f"| matmul-bound phases at {PAPER_SCALE[0]} x {PAPER_SCALE[1]} | >= {MATMUL_TARGET} | not measured | - | - |")
    for record, (name, fraction, text) in judged:
        rows.append(f"| matmul-bound phases, {_size_name(record)} | >= {MATMUL_TARGET} of the matmul (or of the bound of "
                    f"a phase that draws) | lowest: {name} {text} | {matmul(record)} | "
                    f"{'met' if fraction >= MATMUL_TARGET else '**NOT met**'} |")
    axes = report.get("scaling", {})
    exponents = [f"along {axis}: {row['step_exponent']:.2f} a step, {row['refit_exponent']:.2f} a refit"
                 for axis, row in axes.items() if row.get("step_exponent") is not None]
    rows.append(f"| scaling exponents, >= 3 sizes along K and along |Q| | both axes | "
                f"{'; '.join(exponents) if exponents else 'not measured'} | - | "
                f"{'met' if len(exponents) == 2 else '-'} |")
    smaller = [(record, lowest_matmul_bound(record)) for record in report["records"] if not is_paper_scale(record)]
    lines = ["## Targets", "",
             "The speed targets (2-core CPU, default settings), each beside the float32 matmul of the same run "
             "(GFLOP/s; the median of its samples).", "",
             "| target | bound | measured | matmul | verdict |", "|---|---|---|---|---|", *rows, ""]
    smaller = [(record, lowest) for record, lowest in smaller if lowest is not None]
    if smaller:
        lowest = ", ".join(f"{_size_name(record)}: {name} {text}" for record, (name, _, text) in smaller)
        lines += [f"Below the paper's scale the phases' fractions are reported, not judged (`PAPER_SCALE`); "
                  f"the lowest: {lowest}.", ""]
    return lines


def markdown(report: dict) -> str:
    full = all(record.get("full_default_run") for record in report["records"])
    budget = ("each size trained its default run itself (its budget, or until the selection patience stopped "
              "it) plus the fresh-attacker check; the default-run time is the sum of its timed phases. "
              if full else
              "each size trained for the given steps plus the default fresh-attacker check; the default-budget "
              "time is seconds per call x the calls of a 1,500-step run that no patience stops. ")
    lines = [
        "# Where the training time goes",
        "",
        f"`{report['command']}` (seed {report['seed']}, {report['threads']} thread(s), device "
        f"{report.get('device', 'cpu')}). Default game "
        f"(`GameConfig()`, kappa 1.5); {budget}"
        "`of peak`: achieved FLOP/s over the matmul FLOP/s measured in the same process (float32 for the "
        "networks, float64 for the ridge fit; with in-run samples, the median of the run's).",
        "",
        *_targets_lines(report),
    ]
    for record in report["records"]:
        composition = record.get("composition", 1)
        target = TARGETS.get((record["individuals"], record["attributes"], composition))
        composed = "" if composition == 1 else (
            f", composition of {composition} (Table 5: {composition - 1} fixed Gaussian mechanisms, sigma "
            f"{record['fixed_gaussian_sigmas'][0]:.4g}, and the learned one under DPH^{{{record['dp_epsilon']:g}}})")
        on_cpu = record.get("device", "cpu") == "cpu"
        verdict = "" if target is None else (
            f"; target <= {target:.0f} s: {'met' if record['projected_default_seconds'] <= target else 'NOT met'}"
            if on_cpu else f"; (the target, <= {target:.0f} s, is the 2-core CPU's)")
        lines += [
            f"## K = {record['individuals']}, |Q| = {record['attributes']}, N = {record['members']}{composed}",
            "",
            f"device {record.get('device', 'cpu')}; {_references_line(record)}; measured run {record['wall_seconds']:.1f} s ({record['steps']} steps{_stop(record)}); peak memory "
            f"{record['peak_memory_gib']:.2f} GiB{_device_memory(record)}; **{'default run (measured, timed phases)' if record.get('full_default_run') else 'projected default run'} "
            f"{record['projected_default_seconds']:.0f} s**{verdict}; refit on {record['refit_rows']} releases.",
            "",
            "| phase | s / call | calls (default) | s (default) | share | GFLOP / call | GFLOP/s | of peak |",
            "|---|---|---|---|---|---|---|---|",
        ]
        total = record["projected_default_seconds"]
        for name, phase in record["phases"].items():
            if _is_decomposition(name) and "fraction_of_bound" in phase:
                of_peak = f"{phase['fraction_of_bound']:.2f} of its bound"
            else:
                of_peak = f"{phase.get('fraction_of_matmul', 0):.2f}" + (
                    f" ({phase['fraction_of_bound']:.2f} of its bound)" if "fraction_of_bound" in phase else "")
            flop = (f"{phase['gflop_per_call']:.3g} | {phase['gflops']:.1f} | {of_peak}" if "gflops" in phase
                    else "- | - | -")
            lines.append(f"| {name} | {phase['seconds_per_call']:.4f} | {phase['default_calls']:.0f} | "
                         f"{phase['default_seconds']:.1f} | {phase['default_seconds'] / total:.0%} | {flop} |")
        lines += ["", _matmul_verdict(record), *_decomposition_lines(record), "", *_products_lines(record),
                  *_evaluation_lines(record)]
    lines += ["## Scaling", "", "| along | sizes | s / step | step exponent | s / refit | refit exponent |",
              "|---|---|---|---|---|---|"]
    for axis, row in report["scaling"].items():
        fmt = lambda values: ", ".join(f"{v:.3g}" for v in values)  # noqa: E731
        exp = lambda value: "-" if value is None else f"{value:.2f}"  # noqa: E731
        lines.append(f"| {axis} | {fmt(row['sizes'])} | {fmt(row['step_seconds'])} | {exp(row['step_exponent'])} | "
                     f"{fmt(row['refit_seconds'])} | {exp(row['refit_exponent'])} |")
    return "\n".join(lines) + "\n"


def _overrides(settings: list[str]) -> dict[str, bool | int | float]:
    """``NAME=VALUE`` settings as flat GameConfig settings (:meth:`bngp.game.GameConfig.from_flat`) (ints stay ints; true / false are booleans)."""
    out: dict[str, bool | int | float] = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        if value.lower() in ("true", "false"):
            out[name] = value.lower() == "true"
        else:
            out[name] = int(value) if value.lstrip("-").isdigit() else float(value)
    return out


def recount(source: Path, out: Path) -> int:
    """Recompute the FLOP columns of the report ``source`` (its measured seconds and references
    kept) with this version's FLOP model, and write it to ``out``."""
    from bngp.io_utils import write_json, write_text

    report = json.loads(source.read_text())
    for record in report["records"]:
        game = _game(record["individuals"], record["attributes"], record.get("composition", 1), record["seed"],
                     record["steps"], record["fresh_check_steps"], record.get("overrides"))
        _judge(record, game)
    report["command"] += "; FLOP columns recounted by python experiments/benchmarks/game_phases.py --recount"
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "game_phases.json", report)
    write_text(out / "game_phases.md", markdown(report))
    return 0


def _size(text: str) -> tuple[int, int, int]:
    """``KxQ`` or ``KxQxM`` -> (K, |Q|, M mechanisms composed, 1 without)."""
    try:
        values = [int(v) for v in text.split("x")]
    except ValueError:
        values = []
    if len(values) not in (2, 3) or min(values) < 1:
        print(f"game_phases: a size is KxQ or KxQxM with positive integers, got {text!r}", file=sys.stderr)
        raise SystemExit(2)  # bad input: one line and exit code 2, as the bngp CLI
    return values[0], values[1], values[2] if len(values) == 3 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated KxQ sizes (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=50, help="defender steps measured per size (default: %(default)s)")
    parser.add_argument("--full", action="store_true",
                        help="train each size's default run itself (its whole budget, or until the defender "
                             "selection's patience stops it) instead of --steps, and report its own calls")
    parser.add_argument("--fresh-check-steps", type=int, default=1000, help="(default: %(default)s, the GameConfig default)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    parser.add_argument("--device", choices=DEVICE_NAMES, default="cpu",
                        help="where the game trains (bngp.device; default: %(default)s, the CPU measurements)")
    parser.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    parser.add_argument("--out", default="experiments/results/benchmarks", help="output folder (default: %(default)s)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a numeric GameConfig setting other than its default, e.g. attacker_steps=5 (repeatable)")
    parser.add_argument("--recount", metavar="REPORT.json",
                        help="recompute the FLOP columns of a saved report from the layer sizes (no training), "
                             "written to --out")
    parser.add_argument("--evaluate", default=DEFAULT_EVALUATE, metavar="SIZES|none",
                        help="comma-separated sizes whose trained defender, and the fixed defense "
                             f"{DEFAULT_DEFENSE}, `bngp evaluate --attacks all` then attacks "
                             f"({EVALUATION_RELEASES} releases; default: %(default)s)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # KxQ: measure one size in this process, JSON on stdout
    args = parser.parse_args(argv)
    if args.recount:
        return recount(Path(args.recount), Path(args.out))
    steps = None if args.full else args.steps
    evaluated = set() if args.evaluate == "none" else {_size(size) for size in args.evaluate.split(",")}
    if args.one:
        k, q, m = _size(args.one)
        print(json.dumps(measure_one(k, q, steps, args.fresh_check_steps, args.threads, args.seed, _overrides(args.set),
                                     composition=m, device=args.device, evaluate=(k, q, m) in evaluated)))
        return 0
    from bngp.io_utils import write_json, write_text

    sizes = args.sizes.split(",")
    for size in sizes:
        _size(size)  # every size checked before the output folder is made
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for size in sizes:
        command = [sys.executable, __file__, "--one", size, *(["--full"] if args.full else ["--steps", str(args.steps)]),
                   "--threads", str(args.threads), "--device", args.device,
                   "--fresh-check-steps", str(args.fresh_check_steps), "--seed", str(args.seed),
                   "--evaluate", args.evaluate, *(option for setting in args.set for option in ("--set", setting))]
        print(f"[game_phases] {size}: training {'the default run' if args.full else f'{args.steps} steps'} ...",
              file=sys.stderr, flush=True)
        result = subprocess.run(command, stdout=subprocess.PIPE, text=True)  # its stderr (progress, errors) shows
        if result.returncode != 0:
            raise SystemExit(f"game_phases: measuring {size} failed (exit {result.returncode}; its error is above)")
        record = json.loads(result.stdout.strip().splitlines()[-1])
        records.append(record)
        print(f"[game_phases] {size}: {record['wall_seconds']:.1f} s, projected default {record['projected_default_seconds']:.0f} s",
              file=sys.stderr, flush=True)
        report = {"command": "python experiments/benchmarks/game_phases.py " + " ".join(argv or sys.argv[1:]),
                  "seed": args.seed, "threads": args.threads, "device": args.device, "records": records, "scaling": scaling(records)}
        write_json(out / "game_phases.json", report)  # after every size: a long run keeps what it measured
        write_text(out / "game_phases.md", markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
