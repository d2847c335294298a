"""Horizontal federated baselines the papers compare against (LP-GCN Table 4, FedGRec Table 1).

* :class:`FedMF` — federated BPR matrix factorisation (Chai et al.), item gradients through secure
  aggregation.
* :class:`FedNCF` — NeuMF trained by rounds, item rows and weights averaged through secure
  aggregation (Perifanis & Efraimidis).
* FedeRank is :class:`~fedgraphrec.protocols.fedgrec.FedGRec` with ``K = 0`` (spec ``fedgrec.md``
  §5.5); it is not duplicated here.
"""

from fedgraphrec.protocols.baselines.fedmf import FedMF
from fedgraphrec.protocols.baselines.fedncf import FedNCF

__all__ = ["FedMF", "FedNCF"]
