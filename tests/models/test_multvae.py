"""Mult-VAE: the loss falls, evaluation is deterministic, and a killed run resumes exactly."""

from __future__ import annotations

import pytest
import torch

from fedgraphrec.models.multvae import MultVAE
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.trainer import Trainer

TINY = ["model=multvae", "epochs=4", "dataset_options.n_users=60", "dataset_options.n_items=70", "ks=[5]",
        "metric=recall@5", "lr=0.01", "vae_batch_users=16"]  # fmt: skip


def test_loss_falls_and_scores_are_deterministic() -> None:
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(30, 40, generator=g) < 0.2).double()
    m = MultVAE(40, hidden=16, latent=4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    first = m.loss(x, 0.2).nll.item()
    for _ in range(60):
        opt.zero_grad()
        m.loss(x, 0.2).total.backward()
        opt.step()
    assert m.loss(x, 0.2).nll.item() < first
    assert torch.equal(m.scores(x), m.scores(x))  # no dropout or noise at evaluation


def test_trainer_runs_and_resumes_exactly(tmp_path) -> None:
    ref = Trainer(load_config(None, TINY), tmp_path / "ref", progress=False).fit()
    assert ref.summary["model"] == "multvae" and "clients_lost" not in ref.summary

    class Stop(Exception):
        pass

    def crash(epoch: int) -> None:
        if epoch == 2:
            raise Stop

    with pytest.raises(Stop):
        Trainer(load_config(None, TINY), tmp_path / "cut", progress=False, on_epoch_end=crash).fit()
    resumed = Trainer(load_config(None, TINY), tmp_path / "cut", progress=False, resume=True).fit()
    assert resumed.summary["test"] == ref.summary["test"]
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in ref.history]
