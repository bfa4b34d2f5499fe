"""Bit-packed populations end to end: every source, the file format, the release and the
analytic attacks give exactly what the dense path gives (known answer: the dense computation
on the same data), in memory bounded by the bits plus one block, from the API and the CLI."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import torch

from bngp.attacks.statistics import dwork_score, homer, lrs, weighted_score
from bngp.cli import main
from bngp.data.bits import BitMatrix
from bngp.data.genome import simulate_genome
from bngp.data.independent import simulate_independent
from bngp.data.npz import load_population, save_population
from bngp.data.population import Population
from bngp.data.priors import UniformSubsetPrior
from bngp.data.vcf import load_vcf, write_vcf
from bngp.defenses.registry import DefenseContext, parse_defense_spec
from bngp.errors import DataFormatError
from bngp.evaluate import evaluate_defense
from bngp.release.mechanism import allele_frequencies, SummaryStatistics

ANALYTIC = "lrt,adaptive-lrt,optimal-lrt,score,homer,reconstruction,reconstruction-l1"


@pytest.fixture(scope="module")
def population() -> Population:
    return simulate_independent(60, 40, 301, seed=1)


def test_population_packs_and_unpacks(population):
    packed = population.to_packed()
    assert packed.packed and not population.packed
    assert isinstance(packed.genotypes, BitMatrix) and packed.to_packed() is packed
    assert np.array_equal(packed.to_dense().genotypes, population.genotypes)
    assert np.array_equal(packed.reference.to_dense(), population.reference)
    assert np.array_equal(packed.reference_frequencies, population.reference_frequencies)
    assert packed.n_individuals == 60 and packed.n_attributes == 301 and packed.n_reference == 40
    with pytest.raises(DataFormatError, match="both be bit-packed or both dense"):
        Population(packed.genotypes, population.reference)


def test_npz_keeps_the_layout(population, tmp_path):
    packed = population.to_packed()
    save_population(packed, tmp_path / "packed.npz")
    save_population(population, tmp_path / "dense.npz")
    again = load_population(tmp_path / "packed.npz")
    assert again.packed and not load_population(tmp_path / "dense.npz").packed
    assert np.array_equal(again.genotypes.packed, packed.genotypes.packed)
    assert np.array_equal(again.attribute_names, population.attribute_names)
    assert again.metadata == population.metadata
    with np.load(tmp_path / "packed.npz") as archive:  # a file without n_attributes is refused, typed
        arrays = {key: archive[key] for key in archive.files if key != "n_attributes"}
    np.savez(tmp_path / "broken.npz", **arrays)
    with pytest.raises(DataFormatError, match="n_attributes"):
        load_population(tmp_path / "broken.npz")


def test_simulators_give_the_same_matrix_packed():
    dense = simulate_independent(30, 20, 77, seed=4)
    packed = simulate_independent(30, 20, 77, seed=4, packed=True)
    assert packed.packed and np.array_equal(packed.genotypes.to_dense(), dense.genotypes)
    assert np.array_equal(packed.reference.to_dense(), dense.reference)
    dense = simulate_genome(20, 10, 150, seed=2, segment_length=400_000)
    packed = simulate_genome(20, 10, 150, seed=2, segment_length=400_000, packed=True)
    assert np.array_equal(packed.genotypes.to_dense(), dense.genotypes)
    assert np.array_equal(packed.reference.to_dense(), dense.reference)
    assert np.array_equal(packed.attribute_names, dense.attribute_names)


@pytest.mark.parametrize("suffix", [".vcf", ".vcf.gz"])
def test_vcf_round_trip(population, tmp_path, suffix):
    """write_vcf then load_vcf (no MAF filter, r^2 < 1) returns the same carriers for the SNVs it keeps
    (load_vcf drops perfect proxies and constant SNVs: the positions say which ones it kept)."""
    path = write_vcf(population.to_packed(), tmp_path / f"pop{suffix}")
    back = load_vcf(path, reference_samples=list(population.reference_ids), min_maf=0, max_r2=1, packed=True)
    kept = np.array([int(name.split(":")[1]) - 1 for name in back.attribute_names])
    assert back.packed and kept.size > 290
    assert np.array_equal(back.ids, population.ids)
    assert np.array_equal(back.genotypes.to_dense(), population.genotypes[:, kept])
    assert np.array_equal(back.reference.to_dense(), population.reference[:, kept])
    # a population with CHROM:POS names keeps them through the round trip
    named = load_vcf(write_vcf(back, tmp_path / f"named{suffix}"), reference_samples=list(back.reference_ids),
                     min_maf=0, max_r2=1)
    assert np.array_equal(named.attribute_names, back.attribute_names)
    assert np.array_equal(named.genotypes, back.genotypes.to_dense())


def test_release_statistic_packed_equals_dense(population):
    packed = population.to_packed()
    b = UniformSubsetPrior(60, 30).sample(4, np.random.default_rng(0))
    dense_numpy = allele_frequencies(b, population.genotypes)
    assert np.array_equal(allele_frequencies(b, packed.genotypes), dense_numpy)
    packed_torch = SummaryStatistics(packed.genotypes).statistic(torch.tensor(b, dtype=torch.float32))
    assert torch.allclose(packed_torch.double(), torch.from_numpy(dense_numpy), atol=1e-6)
    mechanism = SummaryStatistics(packed.genotypes)
    b_grad = torch.tensor(b, dtype=torch.float32, requires_grad=True)
    mechanism.statistic(b_grad).sum().backward()  # differentiable in b (the game's memberships)
    dense_grad = torch.tensor(b, dtype=torch.float32, requires_grad=True)
    SummaryStatistics(population.genotypes).statistic(dense_grad).sum().backward()
    assert torch.allclose(b_grad.grad, dense_grad.grad, atol=1e-6)


@pytest.mark.parametrize("statistic", [lrs, dwork_score, homer, weighted_score])
def test_affine_statistics_packed_equal_dense(population, statistic):
    releases = allele_frequencies(UniformSubsetPrior(60, 30).sample(3, np.random.default_rng(1)), population.genotypes)
    p = population.reference_frequencies
    assert np.array_equal(statistic(population.to_packed().genotypes, releases, p),
                          statistic(population.genotypes, releases, p))


@pytest.mark.parametrize("spec", ["none", "laplace:epsilon=50"])
def test_evaluation_scores_identical(population, spec):
    prior = UniformSubsetPrior(60, 30)
    results = [evaluate_defense(p, prior, parse_defense_spec(spec, DefenseContext(p, 30)), ANALYTIC, releases=3,
                                seed=3, n_members=30) for p in (population, population.to_packed())]
    for name, scores in results[0].scores.items():
        if name == "reconstruction":  # packed: block sums and an exact float32 Gram, so equal to rounding
            np.testing.assert_allclose(results[1].scores[name], scores, rtol=0, atol=1e-10)
        elif name == "reconstruction-l1":  # float32 ADMM iterations whose products round differently (the
            # tolerance of tests/attacks' float32-against-float64 check)
            np.testing.assert_allclose(results[1].scores[name], scores, rtol=0, atol=1e-4)
        else:  # the affine statistics unpack the same blocks and multiply in the same order: bit for bit
            assert np.array_equal(results[1].scores[name], scores), name
    assert results[0].attacks["lrt"].auc == results[1].attacks["lrt"].auc


def test_release_and_lrt_memory_stay_near_the_bits():
    """f(D) and the LRT on 1,000 x 100,000 packed genotypes (12.5 MB of bits; 100 MB as uint8, 800 MB as
    float64): numpy's traced peak stays below 40 MB (12.5 MB of bits, one 16 MB float64 block, the outputs)."""
    rng = np.random.default_rng(2)
    k, q = 1000, 100_000
    packed = BitMatrix(rng.integers(0, 256, size=(k, q // 8), dtype=np.uint8), q)
    b = UniformSubsetPrior(k, 500).sample(2, rng)
    tracemalloc.start()
    releases = allele_frequencies(b, packed)
    scores = lrs(packed, releases, np.full(q, 0.5))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert releases.shape == (2, q) and scores.shape == (2, k)
    assert peak < 40 * 2**20, peak / 2**20


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_packed_pipeline(tmp_path, capsys):
    pop = tmp_path / "pop.npz"
    code, out, _ = _run(capsys, "simulate", "--model", "independent", "--individuals", 80, "--reference", 40,
                        "--snvs", 500, "--packed", "--seed", 1, "--out", pop)
    assert code == 0 and "bit-packed" in out and load_population(pop).packed
    save_population(load_population(pop).to_dense(), tmp_path / "dense.npz")
    for source in ("pop", "dense"):  # the same seed releases the same noisy statistics from either layout
        code, _, _ = _run(capsys, "release", "--population", tmp_path / f"{source}.npz", "--defense",
                          "laplace:epsilon=100", "--draws", 3, "--members", 40, "--out", tmp_path / f"{source}.rel.npz",
                          "--quiet")
        assert code == 0
    with np.load(tmp_path / "pop.rel.npz") as packed, np.load(tmp_path / "dense.rel.npz") as dense:
        assert packed["releases"].shape == (3, 500)
        assert np.array_equal(packed["releases"], dense["releases"])
        assert np.array_equal(packed["memberships"], dense["memberships"])
    code, out, _ = _run(capsys, "evaluate", "--no-decision", "--population", pop, "--members", 40, "--defense", "none", "--attacks",
                        "lrt,score", "--releases", 3, "--out", tmp_path / "eval.json", "--quiet")
    assert code == 0 and json.loads(out)["auc"]["score"] > 0.9  # 500 SNVs, no noise: the score attack wins


@pytest.mark.parametrize("value", ["0", "1.5"])
def test_cli_refuses_bad_max_r2(tmp_path, capsys, value):
    code, _, err = _run(capsys, "simulate", "--individuals", 10, "--reference", 10, "--snvs", 10, "--max-r2", value,
                        "--out", tmp_path / "p.npz")
    assert code == 2 and "`--max-r2` must be in (0, 1]" in err and "Traceback" not in err
    assert not (tmp_path / "p.npz").exists()


def test_reconstruction_design_operator_packed_equals_dense(population):
    """The packed design A = Z^T / n gives A delta, A^T y, A 1 and A^T A of the dense one (to rounding)."""
    from bngp.attacks.inversion import Design

    dense, packed = Design(population.genotypes, 30), Design(population.to_packed().genotypes, 30)
    rng = np.random.default_rng(5)
    delta, y = torch.from_numpy(rng.normal(size=(3, 60))), torch.from_numpy(rng.normal(size=(3, 301)))
    for a, b in ((dense.apply(delta), packed.apply(delta)), (dense.adjoint(y), packed.adjoint(y)),
                 (dense.row_sums(), packed.row_sums()), (dense.gram(), packed.gram()),
                 (dense.dense(), packed.dense())):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-12)
    grads = []
    for design in (dense, packed):  # differentiable: the packed backward pass is the other product
        x = y.clone().requires_grad_(True)
        (design.apply(design.adjoint(x)) ** 2).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-12, atol=1e-12)


def test_learned_attacks_and_the_game_accept_packed(population, tmp_path):
    """The attacks that need dense genotypes and the BNGP game unpack a packed population and give the
    dense results (same seeds: same AUCs, same training history)."""
    from bngp.game import AttackerSettings, FreshCheckSettings, Game, GameConfig

    prior = UniformSubsetPrior(60, 30)
    aucs = []
    for p in (population, population.to_packed()):
        result = evaluate_defense(p, prior, parse_defense_spec("laplace:epsilon=50", DefenseContext(p, 30)),
                                  "linear,tree", releases=3, seed=3, n_members=30)
        aucs.append({name: entry.auc for name, entry in result.attacks.items()})
    assert aucs[0] == aucs[1]
    config = GameConfig(steps=2, batch_size=8, eval_every=2, eval_batch=32, checkpoint_every=2, seed=7,
                        attacker=AttackerSettings(steps=1), fresh_check=FreshCheckSettings(steps=0))
    histories = [Game(p, prior, config).train(tmp_path / name, progress=False).history
                 for p, name in ((population, "dense"), (population.to_packed(), "packed"))]
    assert histories[0] == histories[1]
