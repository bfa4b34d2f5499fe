"""The release: the summary statistic f(D), output perturbation, composition and noise samplers.

arXiv:2410.07414, section 2.2: the mechanism releases allele (carrier) frequencies f(D); a
defense perturbs them, x = clip(f(D) + xi, 0, 1); section 4.4 / Theorem 5: mechanisms compose.

* :mod:`~bngp.release.mechanism`: f(D) (torch and numpy) and :func:`perturb`.
* :mod:`~bngp.release.composition`: composed releases (App. L.6): :class:`ComposedMechanism`, copies,
  inverse-variance weights and :func:`pool_copies`.
* :mod:`~bngp.release.sampling`: :func:`release_mechanism` and :func:`sample_releases`, the one
  way every part of the toolkit draws a defense's releases.
* :mod:`~bngp.release.shadow`: :func:`simulate_releases`, many releases of one defense for drawn or
  given memberships (``bngp release --draws``).
* :mod:`~bngp.release.noise`: seeded Laplace, Gaussian and l-inf K-norm samplers.
* :mod:`~bngp.release.noise_law`: :class:`NoiseLaw`, a closed-form noise law as data.
"""

from .composition import ComposedMechanism, copy_blocks, copy_count, inverse_variance_weights, pool_copies
from .mechanism import Mechanism, SummaryStatistics, allele_frequencies, perturb
from .noise import sample_gaussian, sample_laplace, sample_linf, sample_noise
from .noise_law import NOISE_KINDS, NoiseLaw
from .sampling import NoiseSource, release_mechanism, release_tensor, sample_releases
from .shadow import RELEASE_CHUNK, publish_batch, simulate_releases

__all__ = [
    "ComposedMechanism",
    "Mechanism",
    "NOISE_KINDS",
    "NoiseLaw",
    "NoiseSource",
    "RELEASE_CHUNK",
    "SummaryStatistics",
    "allele_frequencies",
    "copy_blocks",
    "copy_count",
    "inverse_variance_weights",
    "perturb",
    "pool_copies",
    "publish_batch",
    "release_mechanism",
    "release_tensor",
    "sample_gaussian",
    "sample_laplace",
    "sample_linf",
    "sample_noise",
    "sample_releases",
    "simulate_releases",
]
