"""P-GCN on Flower's simulation runtime: 3 SuperNodes, synthetic data, float64, ``real`` crypto — the same
tables, embeddings, losses, metrics and training ledger as the in-process run on 3 nodes. What the ServerApp
received of the users' uploads (the degrees, every forward layer, the gradients): masked vectors and
presealed shares only."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from fedgraphrec.engines.flower.party_app import simulate
from tests.engines.test_flower_baselines import _cfg, _in_process, _same_history, _training_rows


def test_pgcn_in_flower_simulation_equals_in_process(tmp_path: Path) -> None:
    cfg = _cfg("pgcn", "n_layers=2", "batch_size=16", "frac_bits=40", model="lightgcn+")
    run = simulate(cfg, tmp_path / "flower", 3, export=True)
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    assert run.learner is not None and run.embeddings is not None
    _same_history(run.result, ref)
    got, want = run.learner.server, ref_trainer.learner.server  # type: ignore[union-attr]
    for a, b in ((got.item, want.item), (got.item_w, want.item_w)):  # type: ignore[attr-defined]
        assert float((a - b).norm() / b.norm()) <= 1e-10
    U, V = run.embeddings
    U0, V0 = ref_trainer.learner.embeddings()  # type: ignore[union-attr]
    assert float((U - U0).norm() / U0.norm()) <= 1e-10 and float((V - V0).norm() / V0.norm()) <= 1e-10
    assert _training_rows(run.learner) == _training_rows(ref_trainer.learner)
    # every upload the ServerApp received is a masked vector; the shares are presealed ciphertexts
    entries = run.learner.net.transcript.of("server")
    for prefix in ("setup/degrees", "train/forward/propagate", "train/item-gradients"):
        masked = [e for e in entries if e.phase == f"{prefix}/secagg-masked-input"]
        assert masked and all(e.protection == "masked" for e in masked), prefix
        shares = [e for e in entries if e.phase == f"{prefix}/secagg-share-keys"]
        assert shares and all(e.protected for e in shares), prefix
    assert not any(e.kind == "plain-upload" for e in entries)
