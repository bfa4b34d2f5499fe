"""Memory checked before the work: :mod:`bngp.memory` and the converged linear fit's estimate
(:func:`bngp.linear.converged_fit_bytes`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bngp.errors import InputError, InsufficientMemoryError
from bngp.linear import SHADOW_FLOAT_BUDGET, converged_fit_bytes, max_shadow_releases
from bngp.memory import available_memory, cgroup_headroom, require_memory


def test_the_estimate_is_its_formula():
    # 28 R_max |Q| + 48 K |Q| + 12 V |Q|, R_max = 2^27 // |Q| = 1,342 at |Q| = 10^5 (the cap binds)
    assert max_shadow_releases(2500, 100_000) == SHADOW_FLOAT_BUDGET // 100_000 == 1342
    assert converged_fit_bytes(2500, 100_000) == 28 * 1342 * 100_000 + 48 * 2500 * 100_000 + 12 * 1000 * 100_000
    # below the cap: R_max = 64 max(K, |Q|)
    assert converged_fit_bytes(50, 100, held_out_releases=10) == 28 * 6400 * 100 + 48 * 50 * 100 + 12 * 10 * 100


def test_the_estimate_grows_with_individuals_and_released_values():
    assert converged_fit_bytes(2500, 100_000) < converged_fit_bytes(5000, 100_000)
    assert converged_fit_bytes(2500, 100_000) < converged_fit_bytes(2500, 200_000)
    # at beacon scale (|Q| = 10^6) the K x |Q| float64 matrices alone are far beyond a 24 GiB machine
    assert converged_fit_bytes(2500, 1_000_000) > 100 * 2**30


def test_require_memory_refuses_in_one_line_with_the_hint():
    require_memory(2**30, "a step", available=2**31)  # fits: nothing raised
    with pytest.raises(InsufficientMemoryError, match=r"^a step needs about 2\.0 GiB of memory, more than the 1\.0 GiB "
                                                      r"available; pass --smaller\.$") as raised:
        require_memory(2**31, "a step", "; pass --smaller", available=2**30)
    assert isinstance(raised.value, InputError)  # the command line's exit code 2


def test_available_memory_is_a_positive_count_of_bytes():
    available = available_memory()
    assert available is None or available > 2**20


_PROBE = """
import resource, sys
import torch
torch.set_num_threads(1)
from bngp.data import simulate_independent
from bngp.defenses.dp import LaplaceDefense
from bngp.references import linear_attack_score
population = simulate_independent(500, 100, 5000, seed=0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
linear_attack_score(LaplaceDefense(0.01), population, 250, 0)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.slow
def test_the_estimate_bounds_the_measured_peak_of_a_converged_linear_attack():
    """K = 500, |Q| = 5,000: the fit doubles to 20,000 shadow releases; its peak resident memory above
    the population's (ru_maxrss, Linux kilobytes) is below the estimate and more than half of it."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True,
                         env={"OMP_NUM_THREADS": "1", "PATH": ""})
    measured = int(out.stdout.strip().splitlines()[-1])
    estimate = converged_fit_bytes(500, 5000)
    assert estimate / 2 < measured <= estimate, (measured / 2**30, estimate / 2**30)


def _fake_root(tmp_path, kind: str, limit: str, usage: int, inactive: int):
    """A file tree with /proc/self/{cgroup,mountinfo} and the control group's files, for v1 or v2."""
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    if kind == "v2":
        (proc / "cgroup").write_text("0::/jobs/job7\n")
        (proc / "mountinfo").write_text("41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n")
        folder = tmp_path / "sys" / "fs" / "cgroup" / "jobs" / "job7"
        files = {"memory.max": limit, "memory.current": str(usage), "memory.stat": f"anon 5\ninactive_file {inactive}\n"}
    else:
        (proc / "cgroup").write_text("5:devices:/\n4:memory:/jobs/job7\n3:cpuset:/\n")
        (proc / "mountinfo").write_text("34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
                                        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n")
        folder = tmp_path / "sys" / "fs" / "cgroup" / "memory" / "jobs" / "job7"
        files = {"memory.limit_in_bytes": limit, "memory.usage_in_bytes": str(usage),
                 "memory.stat": f"cache 9\ntotal_inactive_file {inactive}\n"}
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text + "\n")
    return str(tmp_path)


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_the_control_groups_limit_less_its_use_is_what_is_left(kind, tmp_path):
    """Known answer: limit 4 GiB, usage 1 GiB of which 0.25 GiB inactive page cache -> 3.25 GiB left; no limit
    ("max" in v2, the v1 kernel's 2^63 - 4096) -> None."""
    gib = 2**30
    root = _fake_root(tmp_path / "limited", kind, str(4 * gib), gib, gib // 4)
    assert cgroup_headroom(root) == 3 * gib + gib // 4
    unlimited = "max" if kind == "v2" else str(2**63 - 4096)
    assert cgroup_headroom(_fake_root(tmp_path / "free", kind, unlimited, gib, 0)) is None
    assert cgroup_headroom(str(tmp_path / "nothing")) is None
