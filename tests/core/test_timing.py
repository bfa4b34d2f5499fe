"""bngp.timing: phase totals, the device synchronisation around each phase, the matmul reference."""

import os
import subprocess
import sys
import time

import pytest
import torch

from bngp.timing import (PhaseTimer, best_seconds, draw_rates, matmul_flops, peak_device_bytes, peak_rss_bytes, phase,
                         running_phase)


def test_phases_accumulate_seconds_and_calls_in_first_use_order():
    timer = PhaseTimer()
    for _ in range(2):
        with timer("b"):
            time.sleep(0.01)
    with timer("a"):
        pass
    totals = timer.to_dict()
    assert list(totals) == ["b", "a"] and totals["b"]["calls"] == 2 and totals["a"]["calls"] == 1
    assert totals["b"]["seconds"] >= 0.02
    resumed = PhaseTimer()
    resumed.restore(totals)
    with resumed("a"):
        pass
    assert resumed.calls == {"b": 2, "a": 2} and resumed.seconds["b"] == totals["b"]["seconds"]


def test_a_nested_phase_is_its_own_entry_and_its_time_is_not_counted_twice():
    """Library code times a block through phase() only while a timer's phase runs; the outer
    phase keeps its own time, so the totals still add up to the time covered."""
    with phase("alone"):  # no timer running: nothing is recorded anywhere
        time.sleep(0.01)
    timer = PhaseTimer()
    start = time.perf_counter()
    with timer("refit: fit"):
        time.sleep(0.02)
        for _ in range(2):
            with phase("tridiagonal reduction"):
                time.sleep(0.03)
    covered = time.perf_counter() - start
    with timer("steps"):
        pass
    assert list(timer.calls) == ["refit: fit / tridiagonal reduction", "refit: fit", "steps"]
    assert timer.calls["refit: fit / tridiagonal reduction"] == 2 and timer.calls["refit: fit"] == 1
    assert timer.seconds["refit: fit / tridiagonal reduction"] >= 0.06
    assert 0.02 <= timer.seconds["refit: fit"] < 0.06  # its own 0.02 s, not the reduction's 0.06 s
    assert timer.seconds["refit: fit"] + timer.seconds["refit: fit / tridiagonal reduction"] == pytest.approx(covered, abs=1e-3)
    with phase("after"):  # the timer's phases are closed: not running any more
        pass
    assert "after" not in timer.calls and not any(name.endswith("after") for name in timer.calls)


def test_the_running_phase_is_the_innermost_open_one():
    """What a watcher charges work to: None outside every phase, the nested name inside."""
    timer = PhaseTimer()
    seen = [running_phase()]
    with timer("refit: fit"):
        seen.append(running_phase())
        with phase("tridiagonal reduction"):
            seen.append(running_phase())
        seen.append(timer.current)
    seen.append(running_phase())
    assert seen == [None, "refit: fit", "refit: fit / tridiagonal reduction", "refit: fit", None]


def test_a_synchronising_timer_waits_before_and_after_each_phase_and_counts_the_wait():
    """The wait after the phase's code is part of the phase (a GPU's queued kernels), the wait
    before it is not (the previous phase's kernels)."""
    events = []

    def synchronize():
        events.append("sync")
        time.sleep(0.02)

    timer = PhaseTimer(synchronize)
    with timer("step"):
        events.append("work")
    assert events == ["sync", "work", "sync"]
    assert 0.02 <= timer.seconds["step"] < 0.04 + 0.5  # one wait inside (a noisy host may add more)
    with pytest.raises(ValueError):
        with timer("failing"):
            raise ValueError("the phase failed")
    assert events[-1] == "sync" and timer.calls["failing"] == 1  # synchronised and counted even so


def test_matmul_reference_and_memory_readings():
    torch.set_num_threads(1)
    flops = matmul_flops(256, 2)
    assert 1e8 < flops < 1e14  # 2 * 256^3 * 2 FLOP timed; any real CPU lies in this range
    assert matmul_flops(256, 2, torch.float64, device="cpu") > 1e8
    assert peak_rss_bytes() > 50 * 2**20  # torch alone is resident
    assert peak_device_bytes("cpu") == 0


def test_best_seconds_times_repeats_after_warmups_and_syncs_before_each_clock():
    """1 warm-up + 3 timings x 2 calls = 7 calls, one sync after the warm-up and after each timing;
    each call sleeps 5 ms, so the best timing of 2 calls is at least 10 ms."""
    calls, syncs = [], []
    seconds = best_seconds(lambda: (calls.append(1), time.sleep(0.005)), 2, sync=lambda: syncs.append(1))
    assert len(calls) == 7 and len(syncs) == 4
    assert 0.010 <= seconds < 1.0


def test_draw_rates_measure_the_cpu_generator():
    torch.set_num_threads(1)
    normals, uniforms = draw_rates(1 << 16, 2)
    assert 1e6 < normals < 1e11 and 1e6 < uniforms < 1e11  # 2^17 draws timed; any real CPU lies in this range


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_matmul_reference_and_peak_memory_on_a_gpu():
    assert matmul_flops(1024, 2, device="cuda") > 1e11
    torch.empty(2**20, device="cuda")
    assert peak_device_bytes("cuda") >= 4 * 2**20


def test_importing_bngp_changes_no_environment_variable():
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    code = "import os, bngp; import bngp.game; assert 'THP_MEM_ALLOC_ENABLE' not in os.environ"
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.parametrize("setting, expected", [(None, "1"), ("0", "0")])
def test_the_bngp_command_puts_large_tensors_on_huge_pages_unless_the_user_chose(setting, expected):
    """The command sets THP_MEM_ALLOC_ENABLE=1 (torch's huge-page advice for CPU tensors of 2 MiB and
    more, read at torch's first allocation) for its own process; a user's own value stays."""
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if setting is not None:
        env["THP_MEM_ALLOC_ENABLE"] = setting
    code = ("import os, contextlib, io\nfrom bngp.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['--version'])\nprint(os.environ['THP_MEM_ALLOC_ENABLE'])")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert output.strip() == expected
