"""bngp.threads: one call limits torch and every BLAS pool, bad counts are typed errors."""

import pytest
import torch
from threadpoolctl import threadpool_info

from bngp.errors import InputError
from bngp.threads import default_threads, set_threads


def test_set_threads_limits_torch_and_the_blas_pools_of_numpy_and_scipy():
    import numpy  # noqa: F401  (their BLAS pools are loaded, as in any run)
    import scipy.linalg  # noqa: F401

    previous = torch.get_num_threads()
    try:
        set_threads(1)
        assert torch.get_num_threads() == 1
        blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        assert blas and all(pool["num_threads"] == 1 for pool in blas)
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_thread_count_that_is_not_a_positive_integer_is_refused(bad):
    with pytest.raises(InputError, match="--threads"):
        set_threads(bad)


def test_the_default_leaves_a_two_core_machine_one_thread(monkeypatch):
    """1 up to 2 cores (oversubscribed torch threads ran 4-10x slower there), else half, at most 8."""
    for cores, expected in ((1, 1), (2, 1), (4, 2), (16, 8), (64, 8), (None, 1)):
        monkeypatch.setattr("os.cpu_count", lambda cores=cores: cores)
        assert default_threads() == expected
