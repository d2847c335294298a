"""Horizontal federated baselines the papers compare against (LP-GCN Table 4, FedGRec Table 1).

* :mod:`.fedmf` — federated BPR matrix factorisation (Chai et al.), item gradients through secure
  aggregation, as party programs (``fedmf.SPEC``).
* :mod:`.fedncf` — NeuMF trained by rounds, item rows and weights averaged through secure
  aggregation (Perifanis & Efraimidis), as party programs (``fedncf.SPEC``).
* :mod:`.fedpergnn` — FedGNN (Wu et al.), as party programs (``fedpergnn.SPEC``): third-party graph
  expansion over item tokens, a 1-hop GNN with neighbours' embeddings, pseudo items and local DP
  on the plain uploads.
* :mod:`.pgcn` — P-GCN (Hu et al.), as party programs (``pgcn.SPEC``): LightGCN+'s forward through
  the users' secure sums, each client's backward through its own star only, secure aggregation.
* FedeRank is FedGRec with ``K = 0`` (:data:`fedgraphrec.protocols.fedgrec.FEDERANK`) (spec ``fedgrec.md``
  §5.5); it is not duplicated here.
"""

__all__: list[str] = []
