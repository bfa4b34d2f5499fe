import numpy as np
import pytest
import torch

from bngp.device import CHUNK_ELEMENTS
from bngp.release.composition import pool_copies
from bngp.release.mechanism import perturb

from bngp.errors import InputError
from bngp.attacks.network import Attacker, AttackerSpec, attacker_widths, ridge_inversion
from bngp.defenses.network import Defender, DefenderSpec, composed_noise, composed_release, defender_widths


def test_paper_widths_at_paper_scale():
    assert defender_widths(800, 30, 5000) == (1500, 1100, 500)
    assert attacker_widths(5000) == (3400, 2000)


def test_defender_bottleneck_is_capped_at_the_papers_500_beyond_paper_scale():
    # beacon scale: the output layer stays 500 x |Q|, not |Q|/10 x |Q| (10^9 weights at 10^5)
    assert defender_widths(2500, 30, 100_000) == (4573, 3354, 500)
    assert defender_widths(800, 30, 2000) == (1500, 1100, 200)


def test_defender_output_range_and_shape():
    torch.manual_seed(0)
    g = Defender(DefenderSpec(20, 50, noise_dim=4))
    b = (torch.rand(8, 20) < 0.5).float()
    r = g.sample_r(8, torch.Generator().manual_seed(0))
    xi = g(b, r).detach()
    assert xi.shape == (8, 50)
    assert float(xi.min()) >= -0.5 and float(xi.max()) <= 0.5


def test_attacker_shapes_and_paper_init_has_no_head():
    h = Attacker(AttackerSpec(50, 20, init="paper"))
    assert h.head is None
    assert h(torch.rand(4, 50)).shape == (4, 20)
    with pytest.raises(InputError):
        h.initialise_from_population(np.zeros((20, 50)), 10, np.full(20, 0.5))
    with pytest.raises(InputError):
        AttackerSpec(50, 20, init="magic")


def test_an_attacker_whose_mlp_is_silent_scores_by_its_head_alone(monkeypatch):
    """Known answer: after set_linear_head (the MLP's last layer zero) the MLP outputs exactly 0, so
    in eval mode without autograd the logits are the head's bit for bit, and the MLP is not run;
    with autograd, in training mode, or once the last layer is not zero, the whole network runs."""
    generator = torch.Generator().manual_seed(3)
    h = Attacker(AttackerSpec(50, 20))
    h.set_linear_head(torch.randn(20, 50, generator=generator), torch.randn(20, generator=generator))
    x = torch.rand(64, 50, generator=generator)
    h.eval()
    with torch.no_grad():
        full = h.net(x) + h.head(x)
    calls = []
    monkeypatch.setattr(h.net, "forward", lambda inputs: calls.append(inputs.shape) or torch.nn.Sequential.forward(h.net, inputs))
    with torch.no_grad():
        assert torch.equal(h(x), full) and torch.equal(h(x), h.head(x))
    assert calls == []
    assert torch.equal(h(x).detach(), full) and len(calls) == 1  # with autograd
    h.train()
    with torch.no_grad():
        h(x)
    assert len(calls) == 2  # training mode: BatchNorm's statistics are updated
    h.eval()
    with torch.no_grad():
        h.net[-1].bias[3] = 0.5
        assert torch.equal(h(x), h.net(x) + h.head(x)) and not torch.equal(h(x), full)
    assert len(calls) == 5


def test_ridge_inversion_recovers_membership_exactly_when_q_exceeds_k():
    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, (30, 200)).astype(np.uint8)
    b = np.zeros(30)
    b[rng.choice(30, 15, replace=False)] = 1
    x = z.T @ b / 15
    w, c = ridge_inversion(z, 15, np.full(30, 0.5), ridge=1e-8)
    assert np.allclose(w @ x + c, b, atol=1e-4)


def test_reconstruction_initialised_attacker_separates_members(small_population):
    z = small_population.genotypes
    k = z.shape[0]
    h = Attacker(AttackerSpec(z.shape[1], k))
    h.initialise_from_population(z, 20, np.full(k, 0.5))
    h.eval()
    rng = np.random.default_rng(0)
    b = np.zeros((5, k), dtype=np.float32)
    for row in b:
        row[rng.choice(k, 20, replace=False)] = 1
    x = torch.as_tensor(b @ z / 20, dtype=torch.float32)
    with torch.no_grad():
        logits = h(x).numpy()
    from bngp.metrics import auc

    assert auc(logits, b) == 1.0


def _shrinking_defender(alpha: float) -> Defender:
    torch.manual_seed(0)
    g = Defender(DefenderSpec(20, 50, noise_dim=4, shrink=True))
    with torch.no_grad():
        g.net[-1].weight.zero_()
        g.net[-1].bias.zero_()  # sigmoid(0) - 0.5 = 0: no network noise
        g.shrink_weight.fill_(alpha)
    g.set_shrink_target(torch.linspace(0.1, 0.9, 50))
    return g


def test_full_shrinkage_releases_the_target_whatever_the_members():
    g = _shrinking_defender(1.0)
    z = (torch.rand(20, 50, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    b = (torch.rand(8, 20, generator=torch.Generator().manual_seed(2)) < 0.5).float()
    x_hat = (b @ z) / b.sum(1, keepdim=True)
    r = g.sample_r(8, torch.Generator().manual_seed(0))
    released = perturb(x_hat, g(b, r, x_hat))
    # exactly the target, bit for bit: no rounding residue of f(D) is left in the release
    assert torch.equal(released, torch.linspace(0.1, 0.9, 50).expand(8, 50))


def test_partial_shrinkage_is_the_convex_combination():
    g = _shrinking_defender(0.25)
    x_hat = torch.full((3, 50), 0.5)
    r = g.sample_r(3, torch.Generator().manual_seed(0))
    released = perturb(x_hat, g(torch.ones(3, 20), r, x_hat))
    assert torch.allclose(released, 0.75 * x_hat + 0.25 * torch.linspace(0.1, 0.9, 50), atol=1e-6)


def test_shrinking_defender_needs_the_statistic_and_a_target_of_the_right_size():
    g = _shrinking_defender(0.5)
    with pytest.raises(InputError, match="x_hat"):
        g(torch.ones(2, 20), torch.rand(2, 4))
    with pytest.raises(InputError, match="50 entries"):
        g.set_shrink_target(np.zeros(49))
    with pytest.raises(InputError, match="no shrinkage"):
        Defender(DefenderSpec(20, 50)).set_shrink_target(np.zeros(50))


def test_attacker_widths_scale_below_the_paper_size_and_are_capped_above():
    assert attacker_widths(1000) == (680, 400)
    assert attacker_widths(25000) == (3400, 2000)
    assert attacker_widths(10) == (32, 32)


@pytest.mark.parametrize("skip,shrink,full_rank", [(False, False, False), (True, True, True), (False, True, True), (True, False, True)])
def test_defender_without_autograd_draws_the_same_noise_bit_for_bit(skip, shrink, full_rank):
    # the in-place path (drawing releases under no_grad) against the differentiable one
    torch.manual_seed(3)
    g = Defender(DefenderSpec(20, 50, noise_dim=4, skip=skip, shrink=shrink, full_rank_noise=full_rank))
    with torch.no_grad():
        for parameter in g.parameters():
            parameter.uniform_(0.0, 0.5)
        if shrink:
            g.set_shrink_target(np.linspace(0.1, 0.9, 50))
    g.eval()
    b = (torch.rand(64, 20, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    r = g.sample_r(64, torch.Generator().manual_seed(2))
    x_hat = torch.rand(64, 50, generator=torch.Generator().manual_seed(4)).double()
    kept = x_hat.clone()
    differentiable = g(b, r, x_hat)
    assert differentiable.requires_grad
    with torch.no_grad():
        drawn = g(b, r, x_hat)
    assert torch.equal(drawn, differentiable.detach())
    assert torch.equal(x_hat, kept)  # the caller's float64 statistic is not overwritten
    released = perturb(x_hat, differentiable)
    assert released.requires_grad
    with torch.no_grad():
        assert torch.equal(perturb(x_hat, drawn), released.detach())
    assert torch.equal(x_hat, kept)


@pytest.mark.parametrize("sigmas", [(), (0.05,), (0.3, 0.05, 0.3)])
@pytest.mark.parametrize("shrink,full_rank", [(False, False), (True, True)])
def test_composed_release_is_the_generic_release_bit_for_bit(sigmas, shrink, full_rank):
    """Known answer: composed_release (fixed blocks without autograd, the CPU's elementwise work by
    row chunks) against the release as every other caller forms it, perturb of m + 1 copies of
    f(D) by composed_noise, on the same draws: the same bits, the same draws left on the generator,
    and the same gradient through G (which the fixed blocks do not carry)."""
    torch.manual_seed(5)
    width = 2 * CHUNK_ELEMENTS // 7 + 3  # 7 rows a chunk and a ragged last chunk
    g = Defender(DefenderSpec(12, width, noise_dim=4, shrink=shrink, full_rank_noise=full_rank))
    with torch.no_grad():  # PyTorch's initialisation: G's sigmoid is not saturated (its last bit matters)
        if shrink:
            g.shrink_weight.uniform_(0.0, 1.0)
            g.set_shrink_target(np.linspace(0.1, 0.9, width))
        if full_rank:
            g.noise_scale.uniform_(0.0, 0.2)
    b = (torch.rand(20, 12, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    r = g.sample_r(20, torch.Generator().manual_seed(2))
    statistic = torch.rand(20, width, generator=torch.Generator().manual_seed(4))
    copies = torch.cat([statistic] * (len(sigmas) + 1), dim=1)
    for mode in (torch.no_grad, torch.enable_grad):
        generic_rng, composed_rng = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
        g.zero_grad()
        with mode():
            generic = perturb(copies, composed_noise(g, sigmas, b, r, copies, generic_rng))
        with mode():
            composed = composed_release(g, sigmas, statistic, b, r, composed_rng)
        assert composed.shape == (20, (len(sigmas) + 1) * width)
        assert torch.equal(composed.detach(), generic.detach())
        assert torch.equal(composed_rng.get_state(), generic_rng.get_state())
        if mode is torch.enable_grad:
            weights = torch.linspace(-1.0, 1.0, composed.shape[1])
            (generic * weights).sum().backward()
            expected = [parameter.grad.clone() for parameter in g.parameters()]
            g.zero_grad()
            (composed * weights).sum().backward()
            assert all(torch.equal(parameter.grad, grad) for parameter, grad in zip(g.parameters(), expected))


@pytest.mark.parametrize("width", [1, 3, 7, 8, 16, 5000, 5003])
@pytest.mark.parametrize("rows", [1, 2, 5, 31])
def test_fixed_noise_drawn_span_by_span_is_one_scaled_draw(width, rows):
    """Known answer: sigma * torch.randn((rows, width)) (composed_noise's fixed block), drawn span by
    span as composed_release draws it, for spans of 2 rows (tails shorter than 16 values joined to
    the span before) and of every row count: the same bits and the same draws left on the generator."""
    from bngp.defenses.network import _draw_spans, _scaled_normals

    for chunk in (1, 2, 3, rows):
        spans = _draw_spans(rows, width, chunk)
        assert spans[0][0] == 0 and spans[-1][1] == rows and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        for sigma in (1.0, 0.1606):
            whole_rng, span_rng = torch.Generator().manual_seed(width + rows), torch.Generator().manual_seed(width + rows)
            whole = sigma * torch.randn((rows, width), generator=whole_rng)
            drawn = torch.cat([_scaled_normals(torch.empty(stop - start, width), sigma, span_rng) for start, stop in spans])
            assert torch.equal(drawn, whole)
            assert torch.equal(span_rng.get_state(), whole_rng.get_state())


@pytest.mark.parametrize("sigmas,weights", [((0.05,), (1.0,)), ((0.3, 0.05, 0.3), (0.2, 0.5, 0.3))])
def test_composed_release_pools_the_copies_as_they_are_drawn(sigmas, weights):
    """Known answer: composed_release(pool=w) is [pool_copies(fixed copies, w), x_L] of the whole
    composed release on the same draws, bit for bit (ragged row chunks), leaves the same draws on
    the generator, and gives G the same gradient."""
    torch.manual_seed(6)
    width = 2 * CHUNK_ELEMENTS // 7 + 3
    g = Defender(DefenderSpec(12, width, noise_dim=4, shrink=True, full_rank_noise=True))
    with torch.no_grad():
        g.shrink_weight.uniform_(0.0, 1.0)
        g.set_shrink_target(np.linspace(0.1, 0.9, width))
        g.noise_scale.uniform_(0.0, 0.2)
    b = (torch.rand(20, 12, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    r = g.sample_r(20, torch.Generator().manual_seed(2))
    statistic = torch.rand(20, width, generator=torch.Generator().manual_seed(4))
    fixed = len(sigmas) * width
    for mode in (torch.no_grad, torch.enable_grad):
        whole_rng, pooled_rng = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
        g.zero_grad()
        with mode():
            whole = composed_release(g, sigmas, statistic, b, r, whole_rng)
            expected = torch.cat([pool_copies(whole[:, :fixed], weights), whole[:, fixed:]], dim=1)
            pooled = composed_release(g, sigmas, statistic, b, r, pooled_rng, pool=weights)
        assert pooled.shape == (20, 2 * width)
        assert torch.equal(pooled.detach(), expected.detach())
        assert torch.equal(pooled_rng.get_state(), whole_rng.get_state())
        if mode is torch.enable_grad:
            (expected * torch.linspace(-1.0, 1.0, 2 * width)).sum().backward()
            grads = [parameter.grad.clone() for parameter in g.parameters()]
            g.zero_grad()
            (pooled * torch.linspace(-1.0, 1.0, 2 * width)).sum().backward()
            assert all(torch.equal(parameter.grad, grad) for parameter, grad in zip(g.parameters(), grads))
    with pytest.raises(InputError, match="one weight per fixed copy"):
        composed_release(g, sigmas, statistic, b, r, torch.Generator(), pool=weights + (0.0,))


def test_float32_sum_of_a_fixed_block_rounds_as_the_float64_sum():
    """Known answer (Figueroa, "When is double rounding innocuous?", SIGNUM Newsl. 30(3), 1995:
    53 >= 2 x 24 + 2): clip(f + e, 0, 1) summed in float32 is perturb's float64 sum rounded to
    float32, bit for bit, over statistics k / 400, 0, 1 and random float32 values, and noise of
    every scale from 2^-60 to 4, both signs (where a sum of three float32 numbers would not be)."""
    from bngp.defenses.network import _perturb_rows

    rng = torch.Generator().manual_seed(0)
    n = 1 << 20
    statistic = torch.cat([torch.randint(0, 401, (n // 2,), generator=rng).float() / 400,
                           torch.rand(n // 2 - 2, generator=rng), torch.tensor([0.0, 1.0])])
    scale = torch.exp2(torch.randint(-60, 3, (n,), generator=rng).float())
    noise = torch.randn(n, generator=rng) * scale
    out = torch.empty(n)
    _perturb_rows(out, statistic, noise)
    expected = perturb(statistic, noise)
    assert torch.equal(out, expected)
    # the sums are not all exact in float32: the test exercises the rounding
    assert not torch.equal(statistic.double() + noise.double(), (statistic + noise).double())
