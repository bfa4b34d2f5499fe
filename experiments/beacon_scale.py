"""Beacon scale on one machine: simulate -> VCF round trip -> DP release -> attacks.

Runs the product's own commands, each in its own process so that its wall time and peak
resident memory (``wait4``'s ``ru_maxrss`` of that process alone) are measured separately:

1. ``bngp simulate`` (stdpopsim, HomSap OutOfAfrica_3G09 CEU chr10 from 10 Mb; every
   segregating biallelic site: ``--min-maf 0 --max-r2 1``), bit-packed;
2. ``write_vcf`` of that population (gzip level 1) and ``bngp simulate --vcf`` reading it back
   packed (the round trip must give the same carrier matrix);
3. ``bngp release --draws R --members N --defense laplace:epsilon=E``: the DP releases a steward
   would publish;
4. ``bngp evaluate`` with the analytic attacks (LRT, adaptive LRT, optimal LRT, score, Homer)
   against the same defense on R releases, with ``--no-decision``: the release decision's converged
   linear attack holds K x |Q| float64 matrices (:func:`bngp.linear.converged_fit_bytes`, over
   100 GiB at 2,500 x 10^6), which ``bngp evaluate`` refuses before any work on a smaller machine.

The float32 matmul throughput of this machine is measured in the same run (reference for the
wall times).  Writes OUT/results.json and OUT/report.md; the large files stay in --work.

    python experiments/beacon_scale.py --snvs 1000000 --out experiments/results/beacon_scale
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bngp.data.npz import load_population
from bngp.io_utils import write_json, write_text
from bngp.timing import matmul_flops

ATTACKS = "lrt,adaptive-lrt,optimal-lrt,score,homer"


def run_stage(name: str, command: list[str], log: Path) -> dict:
    """Run ``command`` in its own process; return its wall time, peak RSS and exit status."""
    print(f"[beacon] {name}: {' '.join(command)}", file=sys.stderr, flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    started = time.perf_counter()
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"stage {name} failed with exit code {code}; see {log}")
    return {"stage": name, "command": " ".join(command), "seconds": seconds,
            "peak_rss_gib": usage.ru_maxrss * 1024 / 2**30}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--individuals", type=int, default=2500)
    parser.add_argument("--reference", type=int, default=500)
    parser.add_argument("--snvs", type=int, default=1_000_000)
    parser.add_argument("--members", type=int, default=1250)
    parser.add_argument("--epsilon", type=float, default=None,
                        help="Laplace epsilon (default |Q| / 100: with the paper's l1 sensitivity |Q| / n the "
                             "per-SNV noise scale is then 100 / n whatever |Q|)")
    parser.add_argument("--releases", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attacks", default=ATTACKS, help=f"attacks of the evaluate stage (default {ATTACKS})")
    parser.add_argument("--skip-vcf", action="store_true", help="leave out the VCF round trip")
    parser.add_argument("--work", default="/tmp/bngp-beacon", help="directory for the large files")
    parser.add_argument("--out", required=True, help="results directory (results.json, report.md)")
    args = parser.parse_args(argv)
    epsilon = args.epsilon if args.epsilon is not None else args.snvs / 100.0
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out = Path(args.out)
    bngp = [sys.executable, "-m", "bngp.cli"]
    population = work / "population.npz"
    defense = f"laplace:epsilon={epsilon:g}"
    load = os.getloadavg()[0]  # other work on the machine slows every stage (and the matmul reference)
    flops = matmul_flops()
    stages = [run_stage("simulate", [*bngp, "simulate", "--individuals", str(args.individuals), "--reference",
                                     str(args.reference), "--snvs", str(args.snvs), "--min-maf", "0", "--max-r2", "1",
                                     "--packed", "--seed", str(args.seed), "--out", str(population)],
                        work / "simulate.log")]
    round_trip = None
    if not args.skip_vcf:
        vcf = work / "population.vcf.gz"
        stages.append(run_stage("write VCF", [sys.executable, "-c", (
            "import sys; from bngp.data.npz import load_population; from bngp.data.vcf import write_vcf; "
            "write_vcf(load_population(sys.argv[1]), sys.argv[2])"), str(population), str(vcf)], work / "write_vcf.log"))
        reloaded = work / "from_vcf.npz"
        stages.append(run_stage("load VCF", [*bngp, "simulate", "--vcf", str(vcf), "--reference", str(args.reference),
                                             "--min-maf", "0", "--max-r2", "1", "--packed", "--seed", str(args.seed),
                                             "--out", str(reloaded)], work / "load_vcf.log"))
        round_trip = _compare(population, reloaded)
        round_trip["vcf_bytes"] = vcf.stat().st_size
    stages.append(run_stage("release", [*bngp, "release", "--population", str(population), "--defense", defense,
                                        "--draws", str(args.releases), "--members", str(args.members), "--seed",
                                        str(args.seed), "--out", str(work / "releases.npz"), "--quiet"],
                            work / "release.log"))
    evaluation = work / "evaluation.json"
    stages.append(run_stage("evaluate", [*bngp, "evaluate", "--population", str(population), "--members",
                                         str(args.members), "--defense", defense, "--attacks", args.attacks, "--releases",
                                         str(args.releases), "--seed", str(args.seed), "--out", str(evaluation),
                                         "--quiet", "--no-decision"], work / "evaluate.log"))
    payload = json.loads(evaluation.read_text())
    loaded = load_population(population)
    results = {
        "individuals": args.individuals, "reference": args.reference, "snvs": args.snvs, "members": args.members,
        "defense": defense, "releases": args.releases, "seed": args.seed,
        "population_file_bytes": population.stat().st_size,
        "packed_bytes": loaded.genotypes.nbytes + loaded.reference.nbytes,
        "dense_uint8_bytes": (args.individuals + args.reference) * args.snvs,
        "simulation_metadata": {k: loaded.metadata.get(k) for k in ("window_right", "n_sites", "n_biallelic",
                                                                     "n_after_maf", "n_after_ld")},
        "matmul_flops_float32": flops, "threads": os.environ.get("OMP_NUM_THREADS", "1"),
        "load_average_at_start": load,
        "machine": platform.platform(), "cpu_count": os.cpu_count(),
        "stages": stages, "vcf_round_trip": round_trip,
        "utility": payload["utility"],
        "attacks": {name: {"auc": entry["auc"], "auc_std": entry.get("auc_std"), "seconds": entry["seconds"],
                           "tpr_at_fpr_0.01": entry.get("tpr_at_fpr", {}).get("0.01")}
                    for name, entry in payload["attacks"].items()},
        "strongest_attack": payload["strongest_attack"],
    }
    write_json(out / "results.json", results)
    write_text(out / "report.md", _report(results))
    print(json.dumps({s["stage"]: [round(s["seconds"], 1), round(s["peak_rss_gib"], 2)] for s in stages}))
    return 0


def _compare(original: Path, reloaded: Path) -> dict:
    """The VCF round trip: same SNVs (positions) and, by sample name, the same carrier rows."""
    a, b = load_population(original), load_population(reloaded)
    same_names = bool(np.array_equal(a.attribute_names, b.attribute_names))
    everyone_a = {name: i for i, name in enumerate(np.concatenate([a.ids, a.reference_ids]).tolist())}
    matrices_a = (a.genotypes, a.reference)
    identical = same_names
    if same_names:
        for matrix, ids in ((b.genotypes, b.ids), (b.reference, b.reference_ids)):
            rows = np.array([everyone_a[name] for name in ids.tolist()])
            in_z = rows < a.n_individuals
            source = np.empty_like(matrix.packed)
            source[in_z] = matrices_a[0].packed[rows[in_z]]
            source[~in_z] = matrices_a[1].packed[rows[~in_z] - a.n_individuals]
            identical &= bool(np.array_equal(source, matrix.packed))
    return {"same_snvs": same_names, "identical_carriers": identical, "snvs_read": b.n_attributes}


def _report(r: dict) -> str:
    gib = 2**30
    lines = [
        f"# Beacon scale: {r['individuals']:,} individuals (+{r['reference']:,} reference) x {r['snvs']:,} SNVs",
        "",
        f"One machine ({r['cpu_count']} cores, OMP_NUM_THREADS={r['threads']}); float32 matmul measured in the same run: "
        f"{r['matmul_flops_float32'] / 1e9:.1f} GFLOP/s (1-minute load average at the start: "
        f"{r.get('load_average_at_start', float('nan')):.2f}).  Each stage is its own process (`{r['stages'][0]['command'].split()[2]}` ...), "
        "its peak resident memory read from `wait4`.",
        "",
        f"Genotypes bit-packed: {r['packed_bytes'] / gib:.2f} GiB in memory (dense uint8 would be "
        f"{r['dense_uint8_bytes'] / gib:.2f} GiB, float32 {4 * r['dense_uint8_bytes'] / gib:.1f} GiB); population file "
        f"{r['population_file_bytes'] / 2**20:.0f} MiB.",
        "",
        "| stage | wall (s) | wall x measured matmul peak (GFLOP a matmul would do in that time) | peak memory (GiB) |",
        "|---|---|---|---|",
    ]
    for s in r["stages"]:
        lines.append(f"| {s['stage']} | {s['seconds']:.1f} | {s['seconds'] * r['matmul_flops_float32'] / 1e9:,.0f} | "
                     f"{s['peak_rss_gib']:.2f} |")
    if r["vcf_round_trip"]:
        v = r["vcf_round_trip"]
        lines += ["", f"VCF round trip ({v['vcf_bytes'] / gib:.2f} GiB gzipped): same SNVs {v['same_snvs']}, "
                      f"identical carrier matrix {v['identical_carriers']} ({v['snvs_read']:,} SNVs read back)."]
    release = next(s for s in r["stages"] if s["stage"] == "release")
    useful = 2.0 * r["releases"] * r["individuals"] * r["snvs"]
    lines += ["", f"The release stage's f(D) = b Z / n is {useful / 1e9:,.0f} GFLOP of matmul on the unpacked blocks: "
                  f"{useful / (release['seconds'] * r['matmul_flops_float32']):.3f} of the measured matmul peak over the "
                  "stage's whole wall time (loading, unpacking, noise and writing included)."]
    lines += ["", f"Defense `{r['defense']}` ({r['members']:,} members of {r['individuals']:,}; {r['releases']} releases): "
                  f"utility loss {r['utility']['utility_loss']:.4f} (data-independent release "
                  f"{r['utility']['data_independent_utility_loss']:.4f}).", "",
              "| attack | AUC | std | TPR at FPR 1% | seconds |", "|---|---|---|---|---|"]
    for name, a in r["attacks"].items():
        tpr = a["tpr_at_fpr_0.01"]
        lines.append(f"| {name} | {a['auc']:.4f} | {a['auc_std'] or 0:.4f} | {'' if tpr is None else f'{tpr:.3f}'} | "
                     f"{a['seconds']:.1f} |")
    lines += ["", f"Strongest attack: {r['strongest_attack']['name']} (AUC {r['strongest_attack']['auc']:.4f}).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
