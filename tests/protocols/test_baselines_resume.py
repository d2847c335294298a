"""The round-based baselines resume from a checkpoint with each node's stage order and last round.

A resumed learner runs set-up again, then restores every node's state (its last round) and its
:class:`~fedgraphrec.runtime.expect.FlowState`; the next round opens the next step, and the numbers
continue exactly. A replayed round is still refused after the resume.
"""

from __future__ import annotations

import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner

SMALL = [
    "dataset_options.n_users=16", "dataset_options.n_items=20", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "clients_per_round=8", "local_steps=2", "n_negatives=4", "ks=[5]",
    "metric='recall@5'", "ncf_hidden=[6, 3]", "reproducible=true",
]  # fmt: skip
"""``reproducible``: the resumed run is compared with an uninterrupted one, so hiding draws are seeded."""


@pytest.mark.parametrize(("protocol", "model"), [("fedpergnn", "lightgcn"), ("fedncf", "ncf")])
def test_a_resumed_run_continues_exactly(protocol: str, model: str) -> None:
    cfg = load_config(
        None, [], shared=SMALL, protocol=protocol, model=model, dataset="synthetic", crypto="real"
    )
    data = prepare_interactions(cfg)
    run = ProtocolLearner(cfg, data, nodes=2)
    for r in range(2):
        run.train_round(r)
    resumed = ProtocolLearner(cfg, data, nodes=2)
    resumed.load_state_dict(run.state_dict())
    for r in range(2, 4):
        assert run.train_round(r).loss == resumed.train_round(r).loss
    assert all(torch.equal(t, resumed.tables()[k]) for k, t in run.tables().items())
    with pytest.raises(IntegrityError, match="already trained round 3"):
        resumed.train_round(1)
