"""The helper process of bngp.workers: calls run there in order, by value, with the caller's threads."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from bngp.errors import InputError
from bngp.rng import resolve_seed
from bngp.workers import Helper, check_workers, current_helper, helping, open_helper


@pytest.fixture(scope="module")
def helper():
    with Helper(threads=1) as started:
        yield started


def test_calls_run_in_another_process_in_order_and_by_value(helper) -> None:
    assert helper.submit(os.getpid).result() != os.getpid()
    array = np.arange(6.0)
    results = [helper.submit(np.multiply, array, factor) for factor in (2.0, 3.0)]
    np.testing.assert_array_equal(results[1].result(), array * 3.0)
    np.testing.assert_array_equal(results[0].result(), array * 2.0)
    tensor = torch.arange(4.0)
    doubled = helper.submit(torch.mul, tensor, 2.0).result()
    assert torch.equal(doubled, tensor * 2) and doubled.data_ptr() != tensor.data_ptr()


def test_the_helper_has_the_callers_threads(helper) -> None:
    assert helper.submit(torch.get_num_threads).result() == 1


def test_an_error_in_the_helper_is_raised_to_the_caller_with_its_type(helper) -> None:
    result = helper.submit(resolve_seed, -1)
    with pytest.raises(InputError, match="`seed` must be a non-negative integer"):
        result.result()
    assert helper.submit(resolve_seed, 3).result() == 3  # the helper is still there


def test_what_cannot_travel_is_refused_at_once(helper) -> None:
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        helper.submit(lambda: 1)


def test_the_current_helper_is_set_for_a_block_only(helper) -> None:
    assert current_helper() is None
    with helping(helper):
        assert current_helper() is helper
        with helping(None):
            assert current_helper() is None
        assert current_helper() is helper
    assert current_helper() is None
    with open_helper(1, 1) as none:
        assert none is None and current_helper() is None


@pytest.mark.parametrize("bad", [0, 3, True, "2", 1.0])
def test_workers_and_threads_are_checked(bad) -> None:
    with pytest.raises(InputError, match="`workers` must be 1 or 2"):
        check_workers(bad)
    with pytest.raises(InputError, match="`workers` must be 1 or 2"):
        with open_helper(bad, 1):
            pass
    with pytest.raises(InputError, match="`threads` of a helper"):
        Helper(threads=0)


def test_an_error_in_the_caller_does_not_wait_for_the_helper() -> None:
    """Leaving the block with an error terminates the helper's running call instead of waiting for it."""
    import time

    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="caller failed"):
        with Helper(threads=1) as helper:
            helper.submit(time.sleep, 60)
            time.sleep(0.5)
            raise RuntimeError("caller failed")
    assert time.perf_counter() - started < 30


def test_a_call_submitted_first_overtakes_those_waiting(helper) -> None:
    """While a call runs, those submitted wait here in order; one of submit_first runs next."""
    import time

    helper.submit(time.sleep, 0.5)
    later = [helper.submit(time.time) for _ in range(2)]
    first = helper.submit_first(time.time)
    times = [result.result() for result in later]
    assert first.result() < times[0] < times[1]


def test_closing_cancels_the_calls_still_waiting() -> None:
    import time
    from concurrent.futures import CancelledError

    with Helper(threads=1) as helper:
        helper.submit(time.sleep, 0.5)
        waiting = helper.submit(time.time)
    with pytest.raises(CancelledError):
        waiting.result()
