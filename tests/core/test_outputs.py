"""The output claim of every writing command (bngp.outputs): refused when present unless forced, never
in a missing folder, replaced together, old files kept on failure."""

from __future__ import annotations

import pytest

from bngp.errors import InputError, MissingFileError
from bngp.outputs import check_new_directory, claim_outputs


def test_claim_refuses_an_existing_main_or_sidecar_file(tmp_path):
    (tmp_path / "e.png").write_text("old plot")
    with pytest.raises(InputError, match=r"e\.png already exists: use --force"):
        claim_outputs("--out", tmp_path / "e.json", [tmp_path / "e.md", tmp_path / "e.png"], force=False)
    assert claim_outputs("--out", tmp_path / "e.json", [tmp_path / "e.png"], force=True).paths[1] == tmp_path / "e.png"


def test_claim_refuses_a_missing_folder_and_a_directory(tmp_path):
    with pytest.raises(MissingFileError, match="folder does not exist"):
        claim_outputs("--out", tmp_path / "absent" / "e.json", force=True)
    assert not (tmp_path / "absent").exists()
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="existing directory"):
        claim_outputs("--out", tmp_path / "d", force=True)


def test_staged_outputs_replace_together_and_remove_stale_sidecars(tmp_path):
    main, report, plot = tmp_path / "e.json", tmp_path / "e.md", tmp_path / "e.learning.png"
    for path in (main, report, plot):
        path.write_text("old")
    outputs = claim_outputs("--out", main, [report, plot], force=True)
    with outputs.staged() as stage:
        stage(main).write_text("new")
        stage(report).write_text("new report")
        assert main.read_text() == "old"  # nothing is in place before the block ends
    assert main.read_text() == "new" and report.read_text() == "new report"
    assert not plot.exists(), "a sidecar of the earlier run that this run did not write must go"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "e.md"]


def test_a_failure_keeps_the_old_outputs_and_leaves_no_partial_file(tmp_path):
    main, report = tmp_path / "e.json", tmp_path / "e.md"
    main.write_text("old")
    outputs = claim_outputs("--out", main, [report], force=True)
    with pytest.raises(RuntimeError, match="boom"):
        with outputs.staged() as stage:
            stage(main).write_text("new")
            raise RuntimeError("boom")
    assert main.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json"]


def test_staging_an_unclaimed_path_is_a_programming_error(tmp_path):
    outputs = claim_outputs("--out", tmp_path / "e.json", force=False)
    with pytest.raises(ValueError, match="not claimed"):
        with outputs.staged() as stage:
            stage(tmp_path / "other.json")


def test_new_directory_check(tmp_path):
    (tmp_path / "demo").mkdir()
    with pytest.raises(InputError, match="already exists: use --force to replace it, or --resume"):
        check_new_directory("--out", tmp_path / "demo", force=False, hint=", or --resume")
    assert check_new_directory("--out", tmp_path / "demo", force=True) == tmp_path / "demo"
    with pytest.raises(MissingFileError, match="create it first"):
        check_new_directory("--out", tmp_path / "a" / "b", force=False)
