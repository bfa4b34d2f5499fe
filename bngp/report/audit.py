"""The reports of a privacy audit: the trade-off plot of FNR against FPR (f-DP, Dong, Roth, Su,
arXiv:1905.02383) and the Markdown reports of ``bngp audit`` and ``bngp audit-mechanism``.

Plain arrays and dicts in, files out: the audit gets its curves from the command, since this
package may not import :mod:`bngp.audit` (same layer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bngp.report import figures
from bngp.report.evaluation import decision_markdown

__all__ = ["plot_tradeoff", "audit_markdown", "mechanism_audit_markdown"]


#: the line style and marker of each role of an audit plot (:func:`bngp.colours.role`, the leading
#: word of a label), so that a role looks the same in every file.
_ROLE_LINES = {"claim": "-", "certified": "--", "gdp": "-.", "fdp-one-run": ":"}
_ROLE_MARKERS = {"guesses": "o", "error-rate": "s"}


def plot_tradeoff(
    path: str | Path,
    *,
    region: dict | None = None,
    curves: list[tuple[str, np.ndarray, np.ndarray]] = (),
    points: list[tuple[str, float, float]] = (),
    title: str = "Empirical trade-off curve",
) -> Path:
    """Plot FNR against FPR (the f-DP picture, Dong, Roth, Su, arXiv:1905.02383) to a PNG file.

    ``region`` holds the arrays of :class:`bngp.audit.EmpiricalTradeoff` as a dict (``alpha``,
    ``beta`` and the ``_upper``/``_lower`` limits, plus ``confidence``): the point estimates are
    drawn as a line and the simultaneous region as a shaded band between the conservative
    corners (alpha_upper, beta_upper) and the optimistic ones (alpha_lower, beta_lower).
    ``curves`` are (label, x, y) trade-off functions (a claim, the certified eps), ``points``
    single (label, FPR, FNR) points (the bits audit).

    A curve's or point's colour, line style and marker follow its role, the leading word of its
    label (``claim``, ``certified``, ``gdp``, ``fdp-one-run``, ``guesses``, ``error-rate``;
    :func:`bngp.colours.role_colour`), never its position in the list, so a role looks the same
    in every audit plot.  The legend sits below the axes, and the axes reach past [0, 1] so that
    a curve along the edge stays inside them.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MultipleLocator

    from bngp.colours import role, role_colour

    figure, axis = plt.subplots(figsize=(5.6, 6.6), dpi=120, layout="constrained")
    if region is not None:
        empirical = role_colour("empirical")
        upper = np.column_stack((region["alpha_upper"], region["beta_upper"]))
        lower = np.column_stack((region["alpha_lower"], region["beta_lower"]))[::-1]
        axis.fill(*np.vstack((upper, lower)).T, color=empirical, alpha=0.2, linewidth=0,
                  label=f"simultaneous {100 * region['confidence']:g}% region")
        axis.plot(region["alpha_upper"], region["beta_upper"], color=empirical, linewidth=0.8, linestyle=":",
                  label="conservative corner (upper limits)")
        axis.plot(region["alpha"], region["beta"], color=empirical, linewidth=1.6, label="empirical (FPR, FNR)")
    for label, x, y in curves:
        axis.plot(x, y, color=role_colour(label), linestyle=_ROLE_LINES.get(role(label), "-"), linewidth=1.6,
                  label=label, zorder=3)
    for label, x, y in points:
        axis.plot([x], [y], marker=_ROLE_MARKERS.get(role(label), "D"), color=role_colour(label), linestyle="none",
                  markersize=7, label=label, zorder=4)
    axis.plot([0, 1], [1, 0], linestyle="--", color=role_colour("chance"), linewidth=0.8, label="random guessing")
    axis.set_xlabel("false positive rate alpha (non-member called member)")
    axis.set_ylabel("false negative rate beta (member missed)")
    axis.set_xlim(-0.015, 1.015)
    axis.set_ylim(-0.015, 1.015)
    for ticks in (axis.xaxis, axis.yaxis):
        ticks.set_major_locator(MultipleLocator(0.2))
    axis.grid(alpha=0.25)
    axis.set_title(title, fontsize=10)
    figure.legend(loc="outside lower center", fontsize=7, frameon=False)
    return figures.save_png(figure, path)


def _number(value: object, digits: int = 4) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.{digits}f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3g}"
    return str(value)


def _claim_cell(row: dict) -> str:
    """The claim column of an audit table: refuted, consistent, or why there is no verdict."""
    if row.get("claim_refuted") is not None:
        return "refuted" if row["claim_refuted"] else "consistent"
    return str(row.get("claim_verdict") or "").split(":", 1)[0]


def _no_claim(payload: dict) -> str:
    if "claimed_guarantee" in payload and payload["claimed_guarantee"] is None:
        return "none (the defense states no DP guarantee)"
    return "none (no claim given)"


def _decision_lines(payload: dict, origin: str = "") -> list[str]:
    """The decision block that opens an audit report: the verdict (``payload["audit_decision"]``,
    :class:`bngp.audit.AuditDecision`), the bound, the design's ceiling and the claimed eps."""
    lines = ["### Decision", "", f"**{payload['audit_decision']['sentence']}**", ""]
    kind = payload.get("epsilon_kind") or ("lower bound" if payload.get("is_lower_bound") else
                                           "measurement, not a lower bound")
    lines += [f"- Bound: epsilon_lb = {_number(payload['epsilon_lb'])} ({kind}{origin}), confidence "
              f"{payload['confidence']:g}, delta {payload['delta']:g}.",
              f"- Design ceiling: {payload['reading']} ({payload['ceiling_state']}).",
              f"- Claimed eps: {payload.get('claim_verdict') or _no_claim(payload)}.", ""]
    return lines


def audit_markdown(payload: dict, rows: list[dict], notes: list[str] = ()) -> str:
    """The Markdown report of an AUDIT.json payload of ``bngp audit``.

    ``rows`` are the table's rows (``method``, ``epsilon_lb``, ``epsilon_ceiling``, ``epsilon_kind``,
    ``confidence``, ``delta``, ``detail`` and the claim fields ``claim_refuted``, ``claim_verdict``),
    one per method run; ``payload`` gives the header (``input``, ``rows``, ``runs``, ``method``,
    ``confidence``, ``delta``, ``epsilon_lb``, ``epsilon_kind``, ``reading``, ``ceiling_state`` and,
    when present, ``attack``, ``epsilon_lb_method``, ``claimed_epsilon``, ``claim_verdict``,
    ``audit_decision``, ``claim``, ``tradeoff`` and ``report``).  The report opens with the audit's decision.
    """
    source = f"`{payload['input']}`" + (f" (attack `{payload['attack']}`)" if payload.get("attack") else "")
    lines = [
        "## Privacy audit",
        "",
        f"Input: {source}, {payload['rows']} rows; method: `{payload['method']}`; confidence "
        f"{payload['confidence']:g}; delta {payload['delta']:g}.",
        "",
        f"Runs: {payload['runs']}.",
        "",
    ]
    origin = f", from `{payload['epsilon_lb_method']}`" if payload.get("epsilon_lb_method") else ""
    lines += _decision_lines(payload, origin)
    claimed = any(row.get("claim_verdict") for row in rows)
    lines += ["| method | epsilon_lb | design ceiling | kind | confidence | delta |" + (" claimed eps |" if claimed else "")
              + " detail |", "|---|---|---|---|---|---|" + ("---|" if claimed else "") + "---|"]
    for row in rows:
        claim_cell = f" {_claim_cell(row)} |" if claimed else ""
        lines.append(
            f"| {row['method']} | {_number(row['epsilon_lb'])} | {_number(row['epsilon_ceiling'])} | "
            f"{row['epsilon_kind']} | {row['confidence']:g} | {row['delta']:g} |{claim_cell} {row['detail']} |"
        )
    claim = payload.get("claim")
    if claim:
        where = (
            f"at FPR <= {_number(claim['alpha'])} the FNR is at most {_number(claim['beta_upper'])}, below the "
            f"claimed {_number(claim['claimed_beta'])}"
            if claim["refuted"]
            else f"closest point: FPR <= {_number(claim['alpha'])}, FNR <= {_number(claim['beta_upper'])}, claimed "
            f"FNR >= {_number(claim['claimed_beta'])}"
        )
        verdict = "**refuted**" if claim["refuted"] else "**not refuted**"
        lines += ["", f"Claim `{claim['claim']}` (its trade-off curve): {verdict} at confidence "
                  f"{claim['confidence']:g} ({where}; assumes {claim['assumption']})."]
    tradeoff = payload.get("tradeoff")
    if tradeoff:
        lines += [
            "",
            f"Trade-off region: {tradeoff['thresholds_examined']} thresholds ({tradeoff['decision_rule']}) over "
            f"{tradeoff['n_nonmembers']} non-members and {tradeoff['n_members']} members; simultaneous at "
            f"confidence {tradeoff['confidence']:g} ({tradeoff['union_bound']}).",
        ]
    return _plot_and_notes(lines, payload, notes, "trade-off plot: FPR on x, FNR on y")


def mechanism_audit_markdown(payload: dict, rows: list[dict], notes: list[str] = ()) -> str:
    """The Markdown report of an AUDIT.json payload of ``bngp audit-mechanism``.

    ``rows`` are the table's rows (``bound``, ``epsilon_lb``, ``epsilon_ceiling``, ``kind``,
    ``detail``): the number reported as ``epsilon_lb`` and the bounds it comes from or stands
    beside.  ``payload`` gives the header (``mode``, ``defense.spec``, ``population``, ``attack.name``,
    ``confidence``, ``delta``, ``design``, ``seed``, ``epsilon_lb``, ``is_lower_bound``,
    ``interpretation``, ``reading``, ``ceiling_state``, ``claimed_epsilon``, ``claim_verdict``,
    ``claimed_guarantee``, ``audit_decision`` and, when present, ``report`` and ``decision``, the release
    decision of :func:`bngp.decision.decide_release`).

    The report opens with the audit's decision (verdict, bound, ceiling, claim) and, when present, the
    release decision: the release's utility loss beside Laplace, Gaussian and the best reference mechanism
    at that loss.
    """
    design = payload["design"]
    lines = [
        f"## Mechanism audit: `{payload['defense']['spec']}` ({payload['mode']})",
        "",
        f"Population: `{payload['population']}` ({design['individuals']} individuals, {design['attributes']} "
        f"attributes); attack `{payload['attack']['name']}`; confidence {payload['confidence']:g}; delta "
        f"{payload['delta']:g}; neighbouring {design['neighbouring']}; seed {payload['seed']}.",
        "",
    ]
    lines += _decision_lines(payload)
    if payload.get("decision"):
        lines += decision_markdown(payload["decision"], heading="### The release at its utility loss")
    lines += [f"epsilon_lb: {payload['interpretation']}.", "", "| bound | epsilon_lb | design ceiling | kind | detail |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['bound']} | {_number(row['epsilon_lb'])} | {_number(row['epsilon_ceiling'])} | "
                     f"{row['kind']} | {row['detail']} |")
    return _plot_and_notes(lines, payload, notes, "trade-off plot of the audit's scores: FPR on x, FNR on y")


def _plot_and_notes(lines: list[str], payload: dict, notes: list[str], caption: str) -> str:
    """An audit report's end: its plot (``payload["report"]["png"]``, by file name) and its notes."""
    png = payload.get("report", {}).get("png")
    if png:
        lines += ["", f"![{caption}]({Path(png).name})"]
    if notes:
        lines.append("")
    lines += [f"- Note: {note}" for note in notes]
    return "\n".join(lines) + "\n"
