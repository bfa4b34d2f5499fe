"""The release decision at beacon scale: ``bngp evaluate`` with its decision, its wall time and peak memory.

Runs, in its own process,

    bngp evaluate --population POP --members N --defense SPEC --attacks ATTACKS --releases R --seed S --out ...

with the release decision (matched Laplace, Gaussian and every reference mechanism at the release's loss, read by
the converged linear attack in the candidates' row-space coordinates: ``bngp.references``), and records its wall
time, its peak resident memory (``ru_maxrss`` of the process), the memory its control group allowed
(``bngp.memory.cgroup_headroom`` before the run: a container's or batch job's limit, which ``bngp`` plans for), the
decision and the float32 matmul throughput measured before and after in this process.  Run it inside a memory
control group of 4 GiB to check the beacon-scale target, for example::

    mkdir /sys/fs/cgroup/memory/bngp4g && echo 4294967296 > /sys/fs/cgroup/memory/bngp4g/memory.limit_in_bytes
    echo $$ > /sys/fs/cgroup/memory/bngp4g/cgroup.procs
    bngp simulate --individuals 2500 --reference 500 --snvs 1000000 --min-maf 0 --max-r2 1 --packed --seed 0 \\
        --out beacon.npz
    OMP_NUM_THREADS=1 python experiments/beacon_decision.py --population beacon.npz \\
        --out experiments/results/beacon_scale/decision_1m

Writes ``results.json``, ``report.md``, the evaluation's ``evaluation.json`` and ``evaluation.md`` and the
command's log into ``--out`` (created; it must not exist); a failed command's log goes to ``OUT.failed.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from bngp.io_utils import write_json, write_text
from bngp.memory import available_memory, cgroup_headroom
from bngp.timing import matmul_flops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beacon_scale import run_stage  # noqa: E402  (the same stage runner: wall time, peak RSS, exit status)

ATTACKS = "lrt,score,homer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", required=True, help="the population file (bit-packed at beacon scale)")
    parser.add_argument("--members", type=int, default=1250)
    parser.add_argument("--defense", default="budget-laplace:budget=0.875x", help="the released mechanism's SPEC")
    parser.add_argument("--attacks", default=ATTACKS, help=f"the evaluation's attacks (default {ATTACKS})")
    parser.add_argument("--releases", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="results directory (must not exist)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        raise SystemExit(f"--out {out} exists: choose a new directory.")
    if not Path(args.population).is_file():
        raise SystemExit(f"--population {args.population} is not a file.")
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    limit, available = cgroup_headroom(), available_memory()
    torch.set_num_threads(threads)
    before = matmul_flops()
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as work:
        work = Path(work)
        evaluation = work / "evaluation.json"
        command = [sys.executable, "-m", "bngp.cli", "evaluate", "--threads", str(threads), "--workers", "1",
                   "--population", args.population, "--members", str(args.members), "--defense", args.defense,
                   "--attacks", args.attacks,
                   "--releases", str(args.releases), "--seed", str(args.seed), "--out", str(evaluation)]
        try:
            stage = run_stage("evaluate", command, work / "evaluate.log")
        except SystemExit:  # keep the failed command's log beside --out
            shutil.copy(work / "evaluate.log", out.with_name(out.name + ".failed.log"))
            raise
        after = matmul_flops()
        payload = json.loads(evaluation.read_text())
        record = {"population": args.population, "members": args.members, "defense": args.defense,
                  "attacks": args.attacks, "releases": args.releases, "seed": args.seed, "threads": threads,
                  "command": stage["command"].replace(str(work), str(out)).replace(f"{sys.executable} -m bngp.cli",
                                                                                   "bngp"),
                  "seconds": stage["seconds"], "peak_rss_gib": stage["peak_rss_gib"],
                  "cgroup_headroom_gib": None if limit is None else limit / 2**30,
                  "available_gib": None if available is None else available / 2**30,
                  "matmul_gflops_before": before / 1e9, "matmul_gflops_after": after / 1e9,
                  "utility_loss": payload["utility_loss"], "strongest_attack": payload["strongest_attack"]["name"],
                  "decision": payload["decision"]}
        staged = work / "out"
        staged.mkdir()
        for name in ("evaluation.json", "evaluation.md", "evaluate.log"):
            shutil.copy(work / name, staged / name)
        write_json(staged / "results.json", record)
        write_text(staged / "report.md", _report(record))
        staged.rename(out)
    print(json.dumps({"seconds": round(record["seconds"], 1), "peak_rss_gib": round(record["peak_rss_gib"], 2),
                      "verdict": record["decision"]["verdict"]}))
    return 0


def _report(record: dict) -> str:
    decision = record["decision"]
    limit = record["cgroup_headroom_gib"]
    lines = [f"# The release decision at beacon scale: `{record['defense']}`", "",
             f"`{record['command']}` ({record['threads']} thread{'s' if record['threads'] > 1 else ''}; the matmul ran at "
             f"{record['matmul_gflops_before']:.0f} and {record['matmul_gflops_after']:.0f} GFLOP/s before and after).",
             "", f"- Wall time {record['seconds']:.0f} s; peak resident memory {record['peak_rss_gib']:.2f} GiB"
             + ("" if limit is None else f", in a memory control group that allowed {limit:.2f} GiB") + ".",
             f"- Utility loss {record['utility_loss']:.5g}; strongest attack of the evaluation "
             f"`{record['strongest_attack']}`.",
             f"- Verdict: {decision['sentence']}.", "",
             "| mechanism | utility loss | linear-attack AUC | TPR at 1% FPR | eps |", "|---|---|---|---|---|"]
    for row in decision["rows"]:
        epsilon = "-" if row["epsilon"] is None else f"{row['epsilon']:.3g}"
        lines.append(f"| {row['label']} | {row['loss']:.5g} | {row['auc']:.4f} | {row['tpr_at_1pct_fpr']:.3f} | "
                     f"{epsilon} |")
    if decision.get("left_out"):
        lines += ["", f"References left out: {decision['left_out']}."]
    if decision.get("threat_model"):
        lines += ["", f"Threat model: {decision['threat_model']}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
