"""Paper-scale training benchmark: K = 800, |Q| = 5000, N = 400 on simulated CEU chr10 (arXiv:2410.07414, App. L).

Reports
- the training-step throughput as a ratio to the machine's float32 matmul throughput measured in
  the same run (FLOPs of a step counted from the layer sizes: forward 2*B*in*out per Linear,
  backward twice that; target >= 0.4);
- the wall time and peak memory of the full run: simulation, training, the fresh-attacker check
  (targets <= 15 min, <= 4 GiB);
- the result: in-game attacker AUC, fresh attacker AUC, utility loss.

Usage: python experiments/bench_game.py [--steps 600] [--kappa 1.5] [--out bench_game.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import linear_flops, matmul_peak_flops, peak_memory_gib  # noqa: E402

from bngp.data.genome import simulate_genome  # noqa: E402
from bngp.data.priors import UniformSubsetPrior  # noqa: E402
from bngp.game import Game, GameConfig  # noqa: E402
from bngp.io_utils import write_json  # noqa: E402


def step_flops(game: Game) -> float:
    """FLOPs of one training step (attacker_steps attacker updates + one defender update)."""
    batch = game.config.batch_size
    defender_forward = linear_flops(game.defender, batch)
    attacker_forward = linear_flops(game.attacker, batch)
    mechanism = 2.0 * batch * game.population.n_individuals * game.mechanism.n_outputs
    attacker_update = defender_forward + mechanism + 3 * attacker_forward
    defender_update = 3 * defender_forward + mechanism + 3 * attacker_forward
    return game.config.attacker_steps * attacker_update + defender_update


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--individuals", type=int, default=800)
    parser.add_argument("--reference", type=int, default=800)
    parser.add_argument("--snvs", type=int, default=5000)
    parser.add_argument("--members", type=int, default=400)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--kappa", type=float, default=1.5)
    parser.add_argument("--fresh-check-steps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default="bench-game-run")
    parser.add_argument("--out", default="bench_game.json")
    args = parser.parse_args()

    started = time.perf_counter()
    peak = matmul_peak_flops()
    population = simulate_genome(args.individuals, args.reference, args.snvs, seed=args.seed)
    simulated = time.perf_counter()
    config = GameConfig(kappa=args.kappa, steps=args.steps, fresh_check_steps=0, seed=args.seed)
    game = Game(population, UniformSubsetPrior(args.individuals, args.members), config)
    warmup = 5
    for _ in range(warmup):
        game.training_step()
    timed = 20
    tick = time.perf_counter()
    for _ in range(timed):
        game.training_step()
    step_seconds = (time.perf_counter() - tick) / timed
    throughput = step_flops(game) / step_seconds
    game = Game(population, UniformSubsetPrior(args.individuals, args.members), config)
    summary = game.train(args.run_dir, progress=True)
    trained = time.perf_counter()
    check = game.fresh_attacker_check(args.fresh_check_steps, args.seed + 2, progress=True)
    finished = time.perf_counter()
    report = {
        "sizes": {"individuals": args.individuals, "snvs": population.n_attributes, "members": args.members},
        "threads": torch.get_num_threads(),
        "matmul_peak_gflops": peak / 1e9,
        "step_gflop": step_flops(game) / 1e9,
        "step_seconds": step_seconds,
        "step_gflops": throughput / 1e9,
        "throughput_ratio_to_matmul_peak": throughput / peak,
        "simulate_seconds": simulated - started,
        "train_seconds": trained - simulated,
        "fresh_check_seconds": finished - trained,
        "wall_seconds": finished - started,
        "peak_memory_gib": peak_memory_gib(),
        "steps": args.steps,
        "kappa": args.kappa,
        "in_game_attacker_auc": summary.in_game_auc,
        "utility_loss": summary.utility_loss,
        "fresh_attacker_auc": check["auc"],
        "fresh_check_steps": args.fresh_check_steps,
    }
    write_json(args.out, report)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
