"""The report of ``benchmarks/scaling.py``: ``scaling.json``, ``scaling.md`` and ``scaling.png``.

Per method: the per-client byte formula (:data:`scaling_model.FORMULAS`), the fitted exponent of
bytes per client per epoch against users (and, for round protocols, per *participating* client), the
measured points, the fit's figure at the full dataset and the measured full-size point when there is
one. Epoch time and peak memory are reported with the load average they were measured under: on a
loaded shared machine (a load above :data:`QUIET_LOAD`) they are context, not results; byte counts do
not depend on load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scaling_model import FORMULAS, PowerFit, fit_power

__all__ = ["bytes_of", "check_rows", "fits_of", "report", "spread"]

MIB = 2**20
QUIET_LOAD = 2.5
"""Highest one-minute load average of a quiet run on the 2-core machine: a run's own process keeps up to
two cores busy (torch's threads); anything above means other jobs shared the machine."""


def bytes_of(row: dict[str, Any], key: str = "mean") -> float:
    """Bytes per client per epoch of a run (``mean`` over every client, or ``mean_active``).

    ``mean_active`` (over the clients that took part) is a round protocol's figure (an epoch is one
    round of ``S`` clients); a minibatch protocol's timed steps reach only some clients, so it has
    none (0).
    """
    b = row.get("bytes_per_client_per_epoch", {})
    if key == "mean_active" and row.get("steps_per_epoch") != 1:
        return 0.0
    return float(b.get(key, b.get("mean", 0.0)))


def _fit(rows: list[dict[str, Any]], get: Any) -> PowerFit | None:
    return fit_power([float(r["users"]) for r in rows], [float(get(r)) for r in rows])


def _exp_of(f: PowerFit | None) -> float | None:
    return None if f is None else f.exponent


def spread(per_step: list[float]) -> float:
    """``max / min − 1`` of the timed steps' bytes (0: every step cost the same; the epoch is exact)."""
    vals = [v for v in per_step if v > 0]
    return max(vals) / min(vals) - 1 if len(vals) > 1 else 0.0


def check_rows(sampled: list[dict[str, Any]], whole: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: bytes per epoch extrapolated from the first steps vs a whole epoch measured."""
    lines = []
    for w in whole:
        r = next((r for r in sampled if (r["method"], r["fraction"]) == (w["method"], w["fraction"])), None)
        if r is None or "bytes_per_client_per_epoch" not in w or w["steps_timed"] != w["steps_per_epoch"]:
            continue
        est, got = bytes_of(r), bytes_of(w)
        lines.append(
            f"| {w['method']} | {w['users']:,} | {r['steps_timed']} of {r['steps_per_epoch']} | "
            f"{_size(est)} | {_size(got)} | {est / got - 1:+.2%} |"
        )
    return lines


def fits_of(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method: exponents (bytes, bytes per participant, time, memory) and the full-size figures.

    Only sampled sizes (fraction < 1) enter a fit; a measured full-size run is reported beside the
    extrapolation, so the two can be compared.
    """
    out: dict[str, dict[str, Any]] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["users"])
        sampled = [r for r in mine if r["fraction"] < 1]
        full_users = max((r.get("full_users", 0) for r in mine), default=0)
        fits = {
            "bytes": _fit(sampled, bytes_of),
            "bytes_active": _fit(sampled, lambda r: bytes_of(r, "mean_active")),
            "epoch_seconds": _fit(sampled, lambda r: r["epoch_seconds"]),
            "peak_rss_gib": _fit(sampled, lambda r: r["peak_rss_gib"]),
        }
        measured_full = next((r for r in mine if r["fraction"] == 1), None)
        out[method] = {
            "dataset": mine[0].get("dataset", ""),
            "formula": FORMULAS.get(method, ""),
            "full_users": full_users,
            "exponents": {k: None if f is None else f.exponent for k, f in fits.items()},
            "prefactors": {k: None if f is None else f.prefactor for k, f in fits.items()},
            "extrapolated_full": {
                k: None if f is None or not full_users else f.at(full_users) for k, f in fits.items()
            },
            "measured_full": None
            if measured_full is None
            else {"bytes": bytes_of(measured_full), "bytes_active": bytes_of(measured_full, "mean_active")},
            "points": [[r["users"], bytes_of(r)] for r in sampled if "bytes_per_client_per_epoch" in r],
            "interactions_exponent": _exp_of(_fit(sampled, lambda r: r["interactions"])),
            "items_exponent": _exp_of(_fit(sampled, lambda r: r["items"])),
            "step_spread": max((spread(r.get("bytes_per_step_total", [])) for r in mine), default=0.0),
        }
    return out


def _size(b: float | None) -> str:
    if not b:
        return "—"
    if b >= 2**30:
        return f"{b / 2**30:.2f} GiB"
    return f"{b / MIB:.2f} MiB" if b >= MIB else f"{b / 1024:.1f} KiB"


def _exp(e: float | None) -> str:
    return "—" if e is None else f"{e:.2f}"


def report(
    rows: list[dict[str, Any]], out: Path, command: str = "", whole: list[dict[str, Any]] | None = None
) -> None:
    """Write ``scaling.json`` (runs + fits), ``scaling.md`` and ``scaling.png`` into ``out``.

    ``whole``: runs of whole epochs (``--batches`` past an epoch) to set beside the extrapolation.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fits = fits_of(rows)
    loads = [r["load_avg_1min"] for r in rows if "load_avg_1min" in r]
    saved = {"command": command, "runs": rows, "fits": fits, "whole_epochs": whole or []}
    (out / "scaling.json").write_text(json.dumps(saved, indent=2) + "\n")

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    for k, (method, f) in enumerate(fits.items()):
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["users"])
        for ax, key in zip(axes, ("mean", "mean_active"), strict=True):
            pts = [(r["users"], bytes_of(r, key) / MIB) for r in mine if bytes_of(r, key) > 0]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.loglog(
                    xs, ys, "o-", color=f"C{k % 10}", label=f"{method} (b = {_exp(f['exponents']['bytes'])})"
                )
    axes[0].set_title("bytes per client per epoch (MiB; P4GCN: per organisation)")
    axes[1].set_title("bytes per participating client per epoch (MiB)")
    for ax in axes:
        ax.set_xlabel("users")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=120)
    plt.close(fig)

    # the runs' own command lines are in scaling.json; the sweep as committed is in the README
    lines = ['Commands: `results/benchmarks/README.md`, section "Scaling with the population".', ""]
    lines += [
        "## Bytes per client per epoch (counts; independent of machine load)",
        "",
        "| method | dataset | formula (per client per epoch, from the programs) | b: bytes ∝ users^b | "
        "measured: users → bytes (mean over all clients) | fit at full size | measured full size |",
        "|---|---|---|---|---|---|---|",
    ]
    for method, f in fits.items():
        if not f["points"]:
            lines.append(f"| {method} | {f['dataset']} | {f['formula']} | — | — | — | — |")
            continue
        cell = f["formula"].replace("|", "\\|")  # a bare | would split the table cell
        measured = " → ".join(f"{u:,}: {_size(b)}" for u, b in f["points"])
        full = f["measured_full"]
        b_act = f["exponents"]["bytes_active"]
        active = (
            ""
            if b_act is None or abs(b_act - (f["exponents"]["bytes"] or 0)) < 0.05
            else f" (per participant {b_act:.2f})"
        )
        exp = _exp(f["exponents"]["bytes"])
        lines.append(
            f"| {method} | {f['dataset']} | {cell} | {exp}{active} | {measured} | "
            f"{_size(f['extrapolated_full']['bytes'])} at {f['full_users']:,} users | "
            f"{'not run' if full is None else _size(full['bytes'])} |"
        )
    axis = {f["dataset"]: (f["interactions_exponent"], f["items_exponent"]) for f in fits.values()}
    lines += ["", "Population axis (what the formulas' |R| and N do on these samples):", ""]
    lines += [
        f"- {ds}: interactions ∝ users^{_exp(i)}, items ∝ users^{_exp(n)}" for ds, (i, n) in axis.items()
    ]
    lines += [
        "",
        "Per-epoch bytes are the timed steps' mean × steps per epoch; the largest spread between two timed "
        "steps of one run: "
        + ", ".join(f"{m} {f['step_spread']:.2%}" for m, f in fits.items() if f["points"])
        + ".",
    ]
    checks = check_rows(rows, whole or [])
    if checks:
        lines += ["", "Extrapolated vs a whole epoch measured:", ""]
        lines += [
            "| method | users | steps timed | extrapolated | whole epoch | error |",
            "|---|---|---|---|---|---|",
        ]
        lines += checks
    quiet = bool(loads) and max(loads) <= QUIET_LOAD  # no recorded load: not known to be quiet
    load_range = f"load average {min(loads, default=0):.1f}–{max(loads, default=0):.1f} on 2 cores"
    lines += [
        "",
        f"## Runs (epoch time and peak memory on a quiet machine: {load_range}, the runs' own included)"
        if quiet
        else f"## Runs (epoch time and peak memory measured under load: {load_range}; context, not results)",
        "",
        "| method | users | interactions | steps timed / per epoch | epoch (s) | peak RSS (GiB) | load | "
        "bytes / client / epoch | per participant | participants |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["method"], r["users"])):
        b = r.get("bytes_per_client_per_epoch")
        cost = (
            "— | — | —"
            if b is None
            else f"{_size(bytes_of(r))} | {_size(bytes_of(r, 'mean_active') or None)} | "
            f"{b.get('active_clients', '—') if r['steps_per_epoch'] == 1 else '—'}"
        )
        lines.append(
            f"| {r['method']} | {r['users']:,} | {r['interactions']:,} | "
            f"{r['steps_timed']} / {r['steps_per_epoch']} | {r['epoch_seconds']:.2f} | "
            f"{r['peak_rss_gib']:.2f} | {r.get('load_avg_1min', float('nan')):.1f} | {cost} |"
        )
    lines += ["", f"Exponents of epoch time and peak memory{'' if quiet else ' (under load)'}:", ""]
    lines += ["| method | epoch time | peak memory |", "|---|---|---|"]
    for method, f in fits.items():
        e = f["exponents"]
        lines.append(f"| {method} | {_exp(e['epoch_seconds'])} | {_exp(e['peak_rss_gib'])} |")
    (out / "scaling.md").write_text("\n".join(lines) + "\n")
