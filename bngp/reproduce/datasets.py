"""The populations of the reproduction runs: the three kinds of data of arXiv:2410.07414, section 5.

* ``genome``: the stand-in for the paper's iDASH / 1000 Genomes chromosome 10 (App. L.1), a
  coalescent simulation of CEU individuals (:func:`bngp.data.genome.simulate_genome`).
* ``adult``: the UCI Adult table binarised into 120 attributes (App. L.5,
  :func:`bngp.data.adult.load_adult`).
* ``digits``: the offline stand-in for MNIST (App. L.5): scikit-learn's 8x8 digits, each image
  encoded by its classifier output probabilities (:func:`bngp.data.images.load_digits_population`).
"""

from __future__ import annotations

from bngp.data.population import Population
from bngp.errors import UnknownNameError
from bngp.reproduce.scales import Sizes

__all__ = ["DATASETS", "make_population"]

#: data set -> what stands in for the paper's data.
DATASETS: dict[str, str] = {
    "genome": "simulated CEU chromosome-10 genomes (stdpopsim OutOfAfrica_3G09 on msprime), carrier status; "
              "stands in for the paper's iDASH 2016 / 1000 Genomes data, which cannot be redistributed",
    "adult": "UCI Adult (Becker & Kohavi 1996, CC BY 4.0), 120 binary attributes",
    "digits": "scikit-learn's 8x8 digits encoded by a logistic-regression classifier's output probabilities "
              "(per-class confidence bins); the offline stand-in for MNIST",
}


def make_population(dataset: str, sizes: Sizes, seed: int) -> Population:
    """The population of ``dataset`` at ``sizes`` (K individuals, a disjoint panel of R), drawn with ``seed``."""
    if dataset == "genome":
        from bngp.data.genome import simulate_genome

        return simulate_genome(sizes.individuals, sizes.reference, sizes.attributes, seed=seed)
    if dataset == "adult":
        from bngp.data.adult import load_adult

        return load_adult(sizes.individuals, sizes.reference, seed=seed)
    if dataset == "digits":
        from bngp.data.images import load_digits_population

        return load_digits_population(sizes.individuals, sizes.reference, seed=seed)
    raise UnknownNameError(f"unknown data set {dataset!r}; known: {', '.join(DATASETS)}.")
