"""``bngp release``: publish one noisy summary-statistics release for a given member list."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from bngp.cli.common import add_population_args
from bngp.data.npz import load_population
from bngp.errors import DataFormatError
from bngp.io_utils import atomic_write
from bngp.rng import torch_generator
from bngp.validation import check_readable_file
from defenses.base import sample_releases
from defenses.registry import DefenseContext, parse_defense_spec


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("release", help="release noisy frequencies of a member list")
    add_population_args(parser, members=False)
    parser.add_argument("--defense", required=True, metavar="SPEC")
    parser.add_argument("--members-file", required=True, metavar="IDS.txt", help="one individual id per line")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, metavar="RELEASE.npz")
    parser.set_defaults(func=run)


def read_member_ids(path: str) -> list[str]:
    """Ids listed one per line (blank lines and '#' comments ignored); no duplicates."""
    path = check_readable_file("members", path)
    try:
        lines = Path(path).read_text().splitlines()
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"{path} is not a text file of ids.") from exc
    ids = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    if not ids:
        raise DataFormatError(f"{path} lists no member ids.")
    if len(set(ids)) != len(ids):
        raise DataFormatError(f"{path} lists an id more than once.")
    return ids


def run(args: argparse.Namespace) -> int:
    population = load_population(args.population)
    ids = read_member_ids(args.members_file)
    rows = population.index_of(ids)
    defense = parse_defense_spec(args.defense, DefenseContext(population, len(rows)))
    b = np.zeros((1, population.n_individuals), dtype=np.float32)
    b[0, rows] = 1.0
    mechanism = defense.mechanism(population.genotypes)
    secure = getattr(defense, "secure_release", None)
    if secure is not None and getattr(defense, "sampler", "torch") == "opendp":
        x_hat = mechanism.statistic(torch.as_tensor(b)).double().numpy()
        x = np.asarray(secure(b, x_hat), dtype=np.float64)
    else:
        x = sample_releases(mechanism, defense, b, torch_generator(args.seed))
    with atomic_write(args.out) as handle:
        np.savez_compressed(handle, release=x[0], attribute_names=population.attribute_names,
                            defense=np.array(args.defense), seed=np.array(args.seed), n_members=np.array(len(rows)))
    print(f"wrote {args.out}: {x.shape[1]} statistics for {len(rows)} members under `{args.defense}`")
    return 0
