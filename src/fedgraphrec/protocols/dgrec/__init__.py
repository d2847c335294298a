"""DGREC: decentralised hypergraph recommender with one-bit LDP gradient flooding (spec ``dgrec.md``).

Modules: :mod:`.sampling` (Algorithm 1), :mod:`.gossip` (the users' peer programs: public items and Algorithm 2's flooding),
:mod:`.hypergraph` (per-user inner-item hypergraphs), :mod:`.model` (batched per-user local models),
:mod:`.trainer` (the training loop, sharing modes and ablation switches).
"""

from fedgraphrec.protocols.dgrec.model import ModelConfig, UserModels
from fedgraphrec.protocols.dgrec.trainer import DGREC, DGRECSettings

__all__ = ["DGREC", "DGRECSettings", "ModelConfig", "UserModels"]
