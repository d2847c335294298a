""":func:`make_learner`: the learner of a run (the oracle, Mult-VAE, or a protocol's ``ProtocolLearner``).

The loop in :mod:`fedgraphrec.training.trainer` only needs a learner that trains on one minibatch of
triples (or one round, :mod:`.round_learners`), exposes final embeddings or scores for evaluation,
and checkpoints its state. The centralized oracle and every protocol implement this, so one loop
(early stopping, checkpoints, run folder) serves all.
"""

from __future__ import annotations

from fedgraphrec.data.types import Interactions, Ratings
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.training.central import CentralLearner
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.dgrec import load_data
from fedgraphrec.training.dgrec_learner import DGRECData, DGRECLearner
from fedgraphrec.training.learner_base import RoundLearner
from fedgraphrec.training.p4gcn_learner import P4GCNLearner, RatingLearner, make_rating_learner
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.round_learners import MultVAELearner

__all__ = ["make_learner"]


def make_learner(
    cfg: TrainConfig, data: Interactions | Ratings
) -> CentralLearner | RoundLearner | ProtocolLearner | DGRECLearner | P4GCNLearner | RatingLearner:
    """The learner for ``cfg.protocol`` (party programs where the protocol has them)."""
    if cfg.protocol == "p4gcn":
        settings = cfg.protocol_settings
        assert isinstance(settings, P4GCNSettings) and isinstance(data, Ratings)
        return make_rating_learner(
            settings, data, seed=cfg.seed, crypto="real" if cfg.crypto == "real" else "accounted",
            transcripts=cfg.transcripts,
        )  # fmt: skip
    assert isinstance(data, Interactions)
    if cfg.entry().programs is not None:
        return ProtocolLearner(cfg, data)
    if cfg.protocol == "dgrec":
        settings = cfg.program_settings()
        assert isinstance(settings, DGRECSettings)
        side = load_data(cfg.dataset, **cfg.dataset_options)  # the run's interactions: validation carved
        return DGRECLearner(settings, DGRECData(data, side.social, side.tags), transcripts=cfg.transcripts)
    if cfg.protocol == "central" and getattr(cfg.settings, "model", "") == "multvae":
        return MultVAELearner(cfg, data)
    if cfg.protocol == "central":
        return CentralLearner(cfg, data)
    raise ValueError(f"unknown protocol {cfg.protocol!r}")
