"""FedGRec: federated graph recommendation with lazy latent embeddings (spec ``fedgrec.md``).

Algorithm 1 as two party programs: :class:`~.server.FedGRecServer` (the warm-up, lines 2–9, is
:meth:`~.server.FedGRecServer.warm_up`; a training round, lines 10–24, is
:meth:`~.server.FedGRecServer.train_round` with Steps 1–4 named) and :class:`~.client.FedGRecClient`
(a node's users: the warm-up's inputs, Steps 1–3 batched over its sampled users in :mod:`.local`,
its side of Step 4's secure sum, :mod:`fedgraphrec.protocols.secagg`). Step 1's draws are in
:mod:`.sampling`; ``roles.py`` names the stages. FedeRank (``K = 0``) and FCF (``K = 0`` with FCF's
squared error) run the same programs.
"""

from typing import Any

from fedgraphrec.protocols.base import ProtocolSpec, settings_from
from fedgraphrec.protocols.fedgrec.client import FedGRecClient
from fedgraphrec.protocols.fedgrec.sampling import RoundSample, sample_round
from fedgraphrec.protocols.fedgrec.server import FedGRecServer
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings

__all__ = [
    "FCF",
    "FEDERANK",
    "SPEC",
    "FedGRecClient",
    "FedGRecServer",
    "FedGRecSettings",
    "RoundSample",
    "sample_round",
]


def _settings(cfg: Any, **fixed: Any) -> FedGRecSettings:
    """The run's settings; FedGRec runs the LightGCN backbone (FedeRank and FCF also plain MF)."""
    if cfg.model != "lightgcn" and not (cfg.protocol != "fedgrec" and cfg.model == "mf"):
        raise ValueError(f"{cfg.protocol} runs the lightgcn backbone; got model={cfg.model!r}")
    return settings_from(FedGRecSettings, cfg, **fixed)


SPEC = ProtocolSpec(
    "fedgrec", FedGRecServer, FedGRecClient, lambda cfg: _settings(cfg, K=cfg.n_layers), ("item_emb",)
)
"""FedGRec-K (``K`` = the run's ``n_layers``)."""
FEDERANK = ProtocolSpec(
    "federank", FedGRecServer, FedGRecClient,
    lambda cfg: _settings(cfg, K=0, loss="bpr", aggregation="mean"), ("item_emb",),
)  # fmt: skip
"""FedeRank: FedGRec with ``K = 0`` (federated BPR-MF)."""
FCF = ProtocolSpec(
    "fcf", FedGRecServer, FedGRecClient, lambda cfg: _settings(cfg, K=0, loss="mse", aggregation="mean"),
    ("item_emb",),
)  # fmt: skip
"""FCF: ``K = 0`` with FCF's confidence-weighted squared error."""
