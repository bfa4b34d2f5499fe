"""--device auto|cpu|cuda of `bngp train`, `bngp evaluate` and `bngp audit-mechanism`."""

import json
import subprocess
import sys

import pytest
import torch

from bngp.cli import main

without_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_error(code, err, fragment):
    lines = [line for line in err.strip().splitlines() if line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("command", ["train", "evaluate", "audit-mechanism"])
def test_help_lists_the_device_and_its_default(command, capsys):
    with pytest.raises(SystemExit) as stopped:
        main([command, "--help"])
    assert stopped.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--device {auto,cpu,cuda}" in text and "(default: auto)" in text.split("--device {auto,cpu,cuda}", 2)[2]


def test_an_unknown_device_is_refused_by_the_parser(small_population_file, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["train", "--no-decision", "--population", str(small_population_file), "--members", "20", "--device", "gpu",
              "--out", str(tmp_path / "run")])
    assert stopped.value.code == 2 and "invalid choice: 'gpu'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@without_cuda
def test_cuda_without_cuda_is_a_one_line_error_before_any_work(small_population_file, tmp_path, capsys):
    common = ["--population", small_population_file, "--members", 20, "--device", "cuda"]
    code, out, err = _run(capsys, "train", *common, "--steps", 2, "--quiet", "--out", tmp_path / "run")
    _one_line_error(code, err, "CUDA is not available")
    code, _, err = _run(capsys, "evaluate", *common, "--defense", "none", "--attacks", "bayesian", "--quiet",
                        "--out", tmp_path / "eval.json")
    _one_line_error(code, err, "CUDA is not available")
    code, _, err = _run(capsys, "audit-mechanism", *common, "--defense", "none", "--mode", "one-run",
                        "--canaries", 10, "--attack", "score", "--quiet", "--out", tmp_path / "audit.json")
    _one_line_error(code, err, "CUDA is not available")
    assert out == "" and not list(tmp_path.iterdir())  # no run directory, no RUN_DIR.incomplete, no report


def test_no_flag_is_auto_and_cpu_gives_its_numbers_without_cuda(small_population_file, tmp_path, capsys):
    """--device defaults to auto: the CPU here without CUDA (then cpu, auto and no flag give the
    same numbers bit for bit), the GPU where CUDA is (no flag and auto record it; cpu stays cpu)."""
    flags = {"none": [], "auto": ["--device", "auto"], "cpu": ["--device", "cpu"]}
    auto = "cuda:0" if torch.cuda.is_available() else "cpu"
    summaries, reports = {}, {}
    for name, extra in flags.items():
        code, out, err = _run(capsys, "train", "--no-decision", "--population", small_population_file, "--members", 20, "--steps", 2,
                              "--fresh-check-steps", 2, "--seed", 4, "--quiet", *extra, "--out", tmp_path / name)
        assert code == 0, err
        reports[name] = {k: v for k, v in json.loads(out).items() if k != "run"}
        summaries[name] = json.loads((tmp_path / name / "summary.json").read_text())
        summaries[name].pop("timings")
        recorded = json.loads((tmp_path / name / "config.json").read_text())["device"]
        assert recorded == reports[name]["device"] == ("cpu" if name == "cpu" else auto)
    if not torch.cuda.is_available():
        for name in flags:
            assert reports[name] == reports["none"] and summaries[name] == summaries["none"]
    else:  # the same draws and schedule on both devices; the numbers differ by rounding only
        assert [row["step"] for row in summaries["none"]["history"]] == [row["step"] for row in summaries["cpu"]["history"]]


def test_evaluate_and_audit_record_the_device(small_population_file, tmp_path, capsys):
    code, _, err = _run(capsys, "evaluate", "--no-decision", "--population", small_population_file, "--members", 20, "--defense", "none",
                        "--attacks", "score", "--releases", 2, "--device", "cpu", "--quiet", "--out", tmp_path / "e.json")
    assert code == 0, err
    assert json.loads((tmp_path / "e.json").read_text())["device"] == "cpu"
    code, _, err = _run(capsys, "audit-mechanism", "--population", small_population_file, "--members", 20,
                        "--defense", "none", "--mode", "one-run", "--canaries", 10, "--attack", "score", "--quiet",
                        "--device", "cpu", "--out", tmp_path / "a.json")
    assert code == 0, err
    assert json.loads((tmp_path / "a.json").read_text())["device"] == "cpu"


def test_the_device_names_do_not_import_torch():
    """The names behind --device come without torch (it is imported when a name is resolved), so
    offering the option costs a command's help nothing; `bngp audit --help` stays torch-free
    (tests/audit/test_audit_cli.py)."""
    code = "import sys, bngp.device; print('torch' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "False"
