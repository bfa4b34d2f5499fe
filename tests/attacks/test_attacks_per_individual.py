"""The per-individual attacker H(x, d) (bngp.attacks.per_individual, .per_individual_network):
weights shared across individuals, defined for any record, evaluated by one genotype matmul,
as strong as the K-output attackers on small populations, typed errors on bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bngp.attacks import get_attack
from bngp.attacks.base import attack_knowledge
from bngp.attacks.per_individual import PerIndividualAttack, PerIndividualConfig
from bngp.attacks.per_individual_network import (
    PerIndividualAttacker,
    PerIndividualSpec,
    PopulationBoundAttacker,
    score_in_blocks,
)
from bngp.attacks.training import optimise_with_validation, PooledSampler
from bngp.device import subnormals_are_flushed
from bngp.rng import spawn_seeds
from bngp.data.independent import simulate_independent
from bngp.data.priors import UniformSubsetPrior
from bngp.defenses.base import Defense
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.errors import DataFormatError, InputError
from bngp.evaluate import evaluate_defense
from bngp.metrics import release_aucs
from bngp.report import evaluation_markdown
from bngp.release.sampling import release_mechanism, sample_releases
from bngp.rng import torch_generator

#: the small setting of the issue: K individuals, N members, |Q| SNVs.
K, N, Q = 60, 30, 200
#: a fit that is quick at this size (the defaults train to convergence: up to 3000 steps).
QUICK = PerIndividualConfig(max_steps=600, validation_draws=128, patience=4)
TINY = PerIndividualConfig(max_steps=20, batch_size=8, warm_start_releases=60, validation_draws=16, validate_every=10)


@pytest.fixture(scope="module")
def population():
    return simulate_independent(K, K, Q, seed=0)


def _knowledge(population, spec: str = "none", members: int = N):
    defense = parse_defense_spec(spec, DefenseContext(population, members))
    return attack_knowledge(population, UniformSubsetPrior(population.n_individuals, members), defense, members), defense


def _random_network(n_snvs: int, n_blocks: int, seed: int) -> PerIndividualAttacker:
    """A network with every weight random (the output MLP's last layer, beta, w and s included), float64."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    network = PerIndividualAttacker(PerIndividualSpec(n_snvs, n_blocks, embedding=4, hidden=8, head_hidden=8),
                                    rng.uniform(0.0, 0.6, n_snvs), n_members=10.0, prior=0.3).double()
    with torch.no_grad():
        for parameter in (network.out[-1].weight, network.out[-1].bias, network.beta, network.snv_weights,
                          network.linear_weights):
            parameter.copy_(torch.randn_like(parameter))
    return network


def _loop_over_individuals(network: PerIndividualAttacker, x: torch.Tensor, genotypes: torch.Tensor) -> torch.Tensor:
    """H(x_r, d_k) straight from the formula of the module docstring, one individual at a time:
    phi evaluated at each target's own genotypes (an (R, |Q|, h) tensor per individual), no
    binary decomposition, no genotype matmul."""
    spec = network.spec
    p, z_scale, g_scale = network.frequencies, network.z_scale, network.genotype_scale
    blocks = x.reshape(x.shape[0], spec.n_blocks, spec.n_snvs)
    z = (blocks - p) * z_scale
    low, high = (blocks <= 0).double(), (blocks >= 1).double()
    release_side = torch.cat([z, low, high, network.logit_frequencies.expand(x.shape[0], 1, -1)], dim=1).transpose(1, 2)
    context = torch.cat([z.mean(2), z.abs().mean(2), torch.log1p((z * z).mean(2)), low.mean(2), high.mean(2)], dim=1)
    columns = []
    for d in genotypes:  # the slow reference: a loop over individuals
        g = (d - p) * g_scale
        own = torch.stack([d, g], dim=1).expand(x.shape[0], -1, -1)
        phi = network.phi(torch.cat([release_side, own], dim=2))  # (R, |Q|, h)
        linear = g[None, :, None] * z.transpose(1, 2)  # l_i(x_j, d_j), (R, |Q|, m)
        e = torch.cat([(network.snv_weights[:, None] * phi).sum(1), (network.linear_weights[:, None] * linear).sum(1)], 1)
        e = e / spec.n_snvs**0.5
        head = network.out(torch.cat([e, context], dim=1)).squeeze(1)
        columns.append(network.bias + e[:, spec.embedding:] @ network.beta + head)
    return torch.stack(columns, dim=1)


def test_the_matmul_evaluation_equals_a_loop_over_individuals() -> None:
    """E = a + D Delta (one matmul, binary d) is the per-individual formula; in float64 they agree
    to 1e-10 (rounding only), for a composed release of two blocks with clipped coordinates."""
    network = _random_network(n_snvs=50, n_blocks=2, seed=0)
    rng = np.random.default_rng(1)
    genotypes = torch.as_tensor(rng.random((7, 50)) < 0.3, dtype=torch.float64)
    x = torch.as_tensor(np.clip(rng.uniform(-0.1, 0.8, (3, 100)), 0.0, 1.0))
    assert bool((x == 0).any())  # clipped coordinates are exercised
    expected = _loop_over_individuals(network, x, genotypes)
    with torch.no_grad():
        torch.testing.assert_close(network(x, genotypes), expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(score_in_blocks(network, x, genotypes.to(torch.uint8)), expected, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(PopulationBoundAttacker(network, genotypes.numpy())(x), expected, rtol=1e-10, atol=1e-10)


def test_parameter_count_does_not_grow_with_the_population(population) -> None:
    """Known answer at |Q| = 200, m = 1, h = 16, hidden 16, output hidden 32: phi (6*16+16) +
    (16*16+16) + (16*16+16) = 656, per-SNV weights s and w 2 * 200 = 400, output MLP
    (17+5)*32+32 + 32+1 = 769, beta and b_0 2: 1827, for K = 30 and for K = 60."""
    counts = set()
    for individuals in (30, 60):
        world = simulate_independent(individuals, 20, Q, seed=individuals)
        knowledge, _ = _knowledge(world, members=individuals // 2)
        attack = get_attack("per-individual", config=PerIndividualConfig(max_steps=0, warm_start_releases=60,
                                                                         validation_draws=8)).fit(knowledge, seed=0)
        counts.add(sum(p.numel() for p in attack.attacker_.parameters()))
        assert attack.describe()["fit"]["parameters"] in counts
    assert counts == {1827}


def test_it_scores_individuals_it_never_saw(population) -> None:
    """H(x, d) is defined for any record: fitted on the population, it scores the reference panel
    (60 other individuals with the same allele frequencies) against releases of datasets drawn
    from that panel, AUC 0.89 measured (> 0.8); an unseen record scores as its copy in the population."""
    knowledge, defense = _knowledge(population)
    attack = get_attack("per-individual", config=PerIndividualConfig(max_steps=200, validation_draws=64)).fit(knowledge, seed=1)
    memberships = UniformSubsetPrior(K, N).sample(20, np.random.default_rng(5))
    releases = sample_releases(release_mechanism(population.reference, 1), defense, memberships, torch_generator(5))
    scores = attack.score(population.reference, releases)
    assert scores.shape == (20, K) and np.all(np.isfinite(scores))
    assert release_aucs(scores, memberships).mean() > 0.8
    # a target's score depends on its record only: the population's own row gives the same score
    both = np.vstack([population.genotypes[:3], population.reference[:2]])
    np.testing.assert_allclose(attack.score(both, releases)[:, :3], attack.score(population.genotypes[:3], releases),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [pytest.param("none", marks=pytest.mark.slow), "laplace:epsilon=50"])
def test_as_strong_as_the_k_output_attackers_at_small_size(population, spec) -> None:
    """K = 60, N = 30, |Q| = 200, the same 50 releases for all: the per-individual attacker's AUC is
    within 0.02 of the stronger of `linear` and `bayesian` (measured: none 0.996 against 1.000;
    Laplace eps = 50: 0.774 against 0.746)."""
    prior = UniformSubsetPrior(K, N)
    defense = parse_defense_spec(spec, DefenseContext(population, N))
    attacks = {"linear": get_attack("linear"), "bayesian": get_attack("bayesian"),
               "per-individual": PerIndividualAttack(config=QUICK)}
    result = evaluate_defense(population, prior, defense, attacks, releases=50, seed=0, n_members=N)
    aucs = {name: entry.auc for name, entry in result.attacks.items()}
    assert aucs["per-individual"] >= max(aucs["linear"], aucs["bayesian"]) - 0.02, aucs
    entry = result.attacks["per-individual"]
    assert entry.bgp_risk < entry.prior_entropy  # log-odds: its cross-entropy is a BGP-risk estimate
    curve, fit = entry.learning_curve, entry.fit
    assert len(curve["releases"]) == len(curve["auc"]) == len(curve["cross_entropy"]) >= 2
    assert fit["validation_cross_entropy"] == min(curve["cross_entropy"])
    assert f"state of step {fit['best_step']} kept by validation-cross-entropy" in evaluation_markdown(result)


def test_fit_is_deterministic_and_stops_early(population) -> None:
    knowledge, _ = _knowledge(population, "laplace:epsilon=50")
    config = PerIndividualConfig(max_steps=2000, batch_size=8, warm_start_releases=60, validation_draws=32,
                                 validate_every=10, patience=2, lr=0.05)
    first = PerIndividualAttack(config=config).fit(knowledge, seed=4)
    again = PerIndividualAttack(config=config).fit(knowledge, seed=4)
    releases, _ = knowledge.simulate(5, 77)
    np.testing.assert_array_equal(first.score(population.genotypes, releases), again.score(population.genotypes, releases))
    fit = first.describe()["fit"]
    assert fit["stopped_early"] and fit["best_step"] <= fit["steps"] < 2000


def test_an_individual_batch_trains_on_subsets(population) -> None:
    """``individual_batch``: each Adam step scores a random subset of the K = 60 individuals.
    |S| >= K is the all-K fit exactly; |S| = 10 is deterministic for a seed and still improves on
    the closed-form start (40 releases under Laplace eps = 50, measured: start 0.757, 300 steps
    on subsets of 10 0.767, on all 60 0.793)."""
    knowledge, _ = _knowledge(population, "laplace:epsilon=50")
    releases, memberships = knowledge.simulate(40, 77)

    def fitted_auc(**settings) -> tuple[float, np.ndarray]:
        config = PerIndividualConfig(batch_size=8, warm_start_releases=60, validation_draws=32, validate_every=20, **settings)
        scores = PerIndividualAttack(config=config).fit(knowledge, seed=4).score(population.genotypes, releases)
        return float(release_aucs(scores, memberships).mean()), scores

    start, _ = fitted_auc(max_steps=0)
    subset, scores = fitted_auc(max_steps=300, individual_batch=10)
    np.testing.assert_array_equal(fitted_auc(max_steps=300, individual_batch=10)[1], scores)
    np.testing.assert_array_equal(fitted_auc(max_steps=40, individual_batch=K)[1], fitted_auc(max_steps=40)[1])
    assert subset > start + 0.005


@pytest.mark.parametrize("prefetch", [False, True])
def test_the_pooled_sampler_returns_what_it_is_asked_for(prefetch: bool) -> None:
    """Requests within a pool read it in order; a larger request draws a pool of its own size; the
    i-th pool comes from the i-th spawned seed, whether the next pool is drawn ahead or not."""
    seeds = spawn_seeds(0, 4)
    calls = []

    def simulate(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        calls.append((n, seeds.index(seed)))
        return np.full((n, 3), float(seeds.index(seed))), np.zeros((n, 2))

    with PooledSampler(simulate, seed=0, chunk=10, prefetch=prefetch) as sample:
        first = [sample(n)[0] for n in (4, 4, 25, 3)]
        assert [x.shape[0] for x in first] == [4, 4, 25, 3]
        assert [float(x[0, 0]) for x in first] == [0.0, 0.0, 1.0, 2.0]
        assert sample(7)[0][:, 0].tolist() == [2.0] * 7  # the third pool, read on
    # every pool read is the one a request draws (size, seed), in order; ahead, a pool of the chunk's
    # size may also have been drawn for pool 1 (not read: the larger request drew its own) and pool 3
    read = [(10, 0), (25, 1), (10, 2)]
    if not prefetch:
        assert calls == read
    else:
        assert [call for call in calls if call in read] == read and set(calls) - set(read) <= {(10, 1), (10, 3)}
    assert sample._executor is None  # closed: no draw outlives the sampler


def test_early_stopping_counts_improvements_larger_than_the_tolerance() -> None:
    """optimise_with_validation keeps the state of least validation loss, and stops after `patience`
    validations that do not lower the loss by more than `tolerance` below the last one that did."""
    module = torch.nn.Linear(1, 1)
    losses = iter([1.0, 0.5, 0.4995, 0.499, 0.6, 0.2, 0.19, 0.1899, 0.1898, 0.5])
    trace = optimise_with_validation(
        module, lambda: module.weight.sum() ** 2, lambda: next(losses), steps=100, lr=1e-3, weight_decay=0.0,
        lr_decay=1.0, decay_every=1, validate_every=10, patience=3, tolerance=0.01,
    )
    # 0.5 (step 10) improves; 0.4995, 0.499, 0.6 do not by more than 0.01: stop at step 40, keep step 30 (0.499)
    assert trace.steps == (0, 10, 20, 30, 40) and trace.stopped_early and trace.best_step == 30
    assert not module.training


def test_training_flushes_subnormals_and_leaves_the_mode_as_it_was() -> None:
    """Each batch is drawn and trained on with subnormal floats flushed to zero (2^-140 reads as 0:
    a nearly perfect attacker's gradients fall there, where the CPU computes on its slow path);
    after training the caller's mode is back."""
    module = torch.nn.Linear(1, 1)
    flushed = []

    def batch_loss():
        flushed.append(subnormals_are_flushed())
        return module.weight.sum() ** 2

    optimise_with_validation(module, batch_loss, lambda: 1.0, steps=3, lr=1e-3, weight_decay=0.0, lr_decay=1.0,
                             decay_every=1, validate_every=10)
    assert flushed == [True] * 3 and not subnormals_are_flushed()


def test_bad_input_is_a_typed_error(population) -> None:
    attack = PerIndividualAttack(config=TINY)
    with pytest.raises(InputError, match="fitted"):
        attack.score(population.genotypes, population.genotypes[:2].astype(float))
    knowledge, _ = _knowledge(population)
    attack.fit(knowledge, seed=0)
    releases, _ = knowledge.simulate(2, 9)
    with pytest.raises(InputError, match="200 columns"):
        attack.score(population.genotypes[:, :100], releases)
    with pytest.raises(DataFormatError, match="binary"):
        attack.score(population.genotypes * 2, releases)
    with pytest.raises(InputError, match="200 columns"):
        attack.score(population.genotypes, releases[:, :150])
    with pytest.raises(DataFormatError, match="NaN"):
        attack.score(population.genotypes, np.full((1, Q), np.nan))
    with pytest.raises(InputError, match="membership_prior"):
        PerIndividualAttack(config=TINY).fit(_knowledge_without(knowledge, "membership_prior"), seed=0)


def _knowledge_without(knowledge, field: str):
    from dataclasses import replace

    return replace(knowledge, **{field: None})


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: PerIndividualConfig(max_steps=-1), "max_steps"),
        (lambda: PerIndividualConfig(batch_size=0), "batch_size"),
        (lambda: PerIndividualConfig(patience=0), "patience"),
        (lambda: PerIndividualConfig(warm_start_releases=2), "warm_start_releases"),
        (lambda: PerIndividualConfig(lr=0.0), "lr"),
        (lambda: PerIndividualConfig(weight_decay=-1.0), "weight_decay"),
        (lambda: PerIndividualConfig(lr_decay=1.5), "lr_decay"),
        (lambda: PerIndividualConfig(embedding=1.5), "embedding"),
        (lambda: PerIndividualConfig(individual_batch=0), "individual_batch"),
        (lambda: PerIndividualSpec(0), "n_snvs"),
        (lambda: PerIndividualAttacker(PerIndividualSpec(3), np.array([0.1, 0.2]), 5.0, 0.5), "frequencies"),
        (lambda: PerIndividualAttacker(PerIndividualSpec(2), np.array([0.1, 0.2]), 0.0, 0.5), "n_members"),
        (lambda: PerIndividualAttacker(PerIndividualSpec(2), np.array([0.1, 0.2]), 5.0, 1.0), "prior"),
    ],
)
def test_bad_settings_are_one_line_input_errors(make, field) -> None:
    with pytest.raises(InputError, match=f"^`{field}` must") as raised:
        make()
    assert "\n" not in str(raised.value)


class _TwoNoisyCopies(Defense):
    """f(D) released twice, each copy with its own Gaussian noise (a composition of two mechanisms)."""

    name = "two-noisy-copies"
    composition = 2

    def noise(self, b: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        scale = torch.tensor([0.02, 0.2]).repeat_interleave(x_hat.shape[1] // 2)
        return scale * torch.randn(x_hat.shape, generator=generator, dtype=x_hat.dtype)


def test_it_reads_a_composed_release_natively(population) -> None:
    """Two copies of f(D) (composition, App. L.6) are read as two blocks of one network, not tiled,
    and the linear part's block weights trust the less noisy copy."""
    from bngp.attacks.composed import for_composition

    knowledge = attack_knowledge(population, UniformSubsetPrior(K, N), _TwoNoisyCopies(), N)
    attack = for_composition(PerIndividualAttack(config=TINY), knowledge.composition)
    assert isinstance(attack, PerIndividualAttack)
    attack.fit(knowledge, seed=0)
    assert attack.attacker_.spec.n_blocks == 2
    beta = attack.attacker_.beta.detach()
    assert float(beta[0]) > 5 * abs(float(beta[1]))
    releases, memberships = knowledge.simulate(10, 3)
    assert release_aucs(attack.score(population.genotypes, releases), memberships).mean() > 0.9
