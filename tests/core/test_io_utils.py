"""Atomic writes: the final file only on success, with the permissions of a plain open."""

from __future__ import annotations

import os
import stat

import pytest

from bngp.io_utils import atomic_write, write_json


def test_written_file_has_plain_open_permissions(tmp_path):
    previous = os.umask(0o022)
    try:
        out = write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644  # 0o666 less umask 0o022 (mkstemp alone gives 0o600)


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_write(tmp_path / "b.bin") as handle:
            handle.write(b"partial")
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []
