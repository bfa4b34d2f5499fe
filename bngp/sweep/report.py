"""The merged outputs of a sweep: ``sweep.json`` (every cell's record) and ``sweep.md`` (a table
per dataset and the failed cells with their errors)."""

from __future__ import annotations

from typing import Any

from bngp.decision import VERDICTS, frontier_verdict

from .config import SweepConfig
from .results import CellResult

__all__ = ["SWEEP_FORMAT", "sweep_payload", "sweep_markdown", "cell_verdicts"]

SWEEP_FORMAT = "bngp-sweep-1"


def sweep_payload(config: SweepConfig, results: tuple[CellResult, ...], *, backend: str, computed: int, reused: int,
                  seconds: float, plot: str) -> dict[str, Any]:
    """The ``sweep.json`` payload: the config, the counts and every cell's record in grid order."""
    return {
        "format": SWEEP_FORMAT,
        "config": config.to_dict(),
        "backend": backend,
        "cells": len(results),
        "computed": computed,
        "reused": reused,
        "failed": sum(not result.ok for result in results),
        "seconds": seconds,
        "frontier_plot": plot,
        "results": [result.to_dict() for result in results],
        "verdicts": cell_verdicts([result.to_dict() for result in results]),
    }


def cell_verdicts(records: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Each successful cell's place among the cells of the same dataset and seed (each attacked the same way):
    :func:`bngp.decision.frontier_verdict` on its utility loss and strongest AUC; None for a failed cell."""
    verdicts: list[dict[str, Any] | None] = []
    for record in records:
        if record["status"] != "ok" or record["utility_loss"] is None:
            verdicts.append(None)
            continue
        others = [(other["spec"], other["utility_loss"], other["strongest_auc"]) for other in records
                  if other is not record and other["status"] == "ok" and other["dataset"] == record["dataset"]
                  and other["seed"] == record["seed"] and other["utility_loss"] is not None]
        verdict, by = frontier_verdict(record["utility_loss"], record["strongest_auc"],
                                       record["data_independent_utility_loss"], others)
        verdicts.append({"verdict": verdict, "by": by})
    return verdicts


def _decision_row(record: dict[str, Any]) -> str:
    decision = record["decision"]
    rows = {row["label"]: row for row in decision["rows"]}

    def reading(label: str) -> str:
        row = rows.get(label)
        if row is None:
            return "-"
        epsilon = "" if row["epsilon"] is None else f" ({row['epsilon']:.3g})"
        return f"{row['auc']:.4f}{epsilon}"

    best = next((label for label in rows if label.startswith("best reference: ")), None)
    return _row([record["dataset"], f"`{record['spec']}`", str(record["seed"]), decision["sentence"].split(":")[0],
                 reading("this release"), reading("Laplace noise (matched)"), reading("Gaussian noise (matched)"),
                 "-" if best is None else f"{best.removeprefix('best reference: ')} {rows[best]['auc']:.4f}"])


def _verdict_text(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "-"
    text = VERDICTS[entry["verdict"]].split(":")[0]
    return f"{text} (`{entry['by']}`)" if entry["by"] else text


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _audit_text(audit: dict[str, Any]) -> str:
    runs = f", {audit['runs']} runs" if audit["mode"] == "many-run" else ""
    delta = "each defense's claimed delta (0 without a claim)" if audit["delta"] is None else f"delta {audit['delta']:g}"
    return (f"**audited eps lb**: a {audit['mode']} canary audit of each cell's defense ({audit['canaries']} canaries"
            f"{runs}, attack `{audit['attack']}`, confidence {audit['confidence']:g}, {delta}, under the defense's own "
            "neighbouring relation). It is a statistically valid lower bound on the eps of the release mechanism: "
            f"with confidence {audit['confidence']:g}, any claimed eps below it is refuted.")


def sweep_markdown(payload: dict[str, Any], *, plot: bool = True) -> str:
    """``sweep.md``: the counts, one table per dataset (each attack's AUC, the strongest attack,
    the utility loss and, with an ``audit``, the audited eps lower bound), the failed cells with
    their errors, and (unless ``plot`` is False, for a report that shows it itself) the frontier plot."""
    records = payload["results"]
    attacks = list(dict.fromkeys(name for record in records for name in record["auc"]))
    audit = payload["config"].get("audit")
    lines = [
        "# Sweep",
        "",
        f"{payload['cells']} cells: {payload['computed']} computed, {payload['reused']} reused, "
        f"{payload['failed']} failed ({payload['backend']} backend, {payload['seconds']:.1f} s; the column "
        "`seconds` gives each cell's time in the run that computed it).",
    ]
    if plot:
        lines += ["", f"![frontier]({payload['frontier_plot']})"]
    if audit is not None:
        lines += ["", _audit_text(audit)]
    extra = ["audited eps lb"] if audit is not None else []
    verdicts = payload.get("verdicts") or cell_verdicts(records)
    lines += ["", "**verdict**: each cell against the other cells of its dataset and seed at no larger utility loss, "
                  "by the strongest attack's AUC (lower envelope; differences below the tolerance of "
                  "`bngp.decision` are not read as differences)."]
    header = ["defense", "seed", "utility loss", "strongest attack", "AUC", "verdict", *attacks, *extra, "seconds",
              "status"]
    align = ["---", "---:", "---:", "---", "---:", "---", *["---:"] * len(attacks), *["---:"] * len(extra), "---:",
             "---"]
    for dataset in dict.fromkeys(record["dataset"] for record in records):
        lines += ["", f"## {dataset}", "", _row(header), _row(align)]
        for record, verdict in zip(records, verdicts):
            if record["dataset"] == dataset:
                lines.append(_row([
                    f"`{record['spec']}`", str(record["seed"]), _number(record["utility_loss"], 5),
                    record["strongest_attack"] or "-", _number(record["strongest_auc"], 4), _verdict_text(verdict),
                    *(_number(record["auc"].get(name), 4) for name in attacks),
                    *([_number((record.get("audit") or {}).get("epsilon_lb"), 3)] if audit is not None else []),
                    f"{record['seconds']:.1f}", record["status"],
                ]))
    decided = [record for record in records if record.get("decision")]
    if decided:
        lines += ["", "## Release decisions", "",
                  "Each cell's release beside matched Laplace and Gaussian noise and the best reference mechanism "
                  "calibrated to its own utility loss, all read by the converged linear attack (`bngp.decision`):", "",
                  _row(["dataset", "defense", "seed", "verdict", "this release", "Laplace (eps)", "Gaussian (eps)",
                        "best reference"]), _row(["---"] * 8)]
        lines += [_decision_row(record) for record in decided]
    failed = [record for record in records if record["status"] != "ok"]
    if failed:
        lines += ["", "## Failed cells", ""]
        lines += [f"- {record['dataset']} `{record['spec']}` seed {record['seed']} ({record['attempts']} attempts): "
                  f"{record['error']}" for record in failed]
    return "\n".join(lines) + "\n"
