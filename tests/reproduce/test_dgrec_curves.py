"""The per-epoch curves of DGREC runner runs: means over seeds, references, the selected epoch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedgraphrec.reproduce.dgrec_curves import curves_table, plot_curves


def _write(folder: Path, variant: str, seed: int, recalls: list[float] | None, metric: float = 0.0) -> None:
    record: dict[str, object] = {"dataset": "toy", "variant": variant, "seed": seed}
    if recalls is None:  # a reference ranking
        record["metrics"] = {"recall@20": metric, "ndcg@20": metric / 2}
    else:
        curve = [
            {"epoch": e + 1, "valid": {"recall@20": r}, "test": {"recall@20": r, "ndcg@20": r / 2}}
            for e, r in enumerate(recalls)
        ]
        best = max(curve, key=lambda c: c["valid"]["recall@20"])  # type: ignore[index]
        record |= {"curve": curve, "metrics": curve[-1]["test"], "selected_epoch": best["epoch"]}
        record["selected_metrics"] = best["test"]
    (folder / f"toy_{variant}_r1.0_s{seed}.json").write_text(json.dumps(record))


def test_curves_average_seeds_per_epoch_and_list_the_references(tmp_path: Path) -> None:
    _write(tmp_path, "dgrec", 0, [0.01, 0.02, 0.03])
    _write(tmp_path, "dgrec", 1, [0.03, 0.04, 0.01])
    _write(tmp_path, "dmf", 0, [0.05, 0.06, 0.07])
    _write(tmp_path, "random", 0, None, 0.008)
    _write(tmp_path, "popularity", 0, None, 0.034)
    table = curves_table(tmp_path, "toy", every=2)
    assert "| dgrec | 2 | 1 | 2.00 ± 1.41 | 1.00 |" in table
    assert "| dgrec | 2 | 2 | 3.00 ± 1.41 | 1.50 |" in table
    assert "| dgrec | 2 | 3 | 2.00 ± 1.41 | 1.00 |" in table
    assert "| dmf | 1 | 2 | 6.00 | 3.00 |" in table
    assert "| random | – | – | 0.80 | 0.40 |" in table and "| popularity | – | – | 3.40 | 1.70 |" in table
    png = plot_curves(tmp_path, "toy", tmp_path / "c.png", {"recall@20": 0.0375}, title="toy")
    assert png.stat().st_size > 0
    with pytest.raises(ValueError, match="no run of 'other'"):
        plot_curves(tmp_path, "other", tmp_path / "d.png", {})
