"""GNN4FR: lossless federated LightGCN by sub-graph expansion (spec ``gnn4fr.md``).

Algorithm 2 (initialize) and 3 (expand the local sub-graph): :class:`GNN4FR` constructor with
:mod:`fedgraphrec.protocols.common`; Algorithm 4 (forward): ``GNN4FR.forward_propagation``;
Algorithm 5 (backward): ``GNN4FR.backward_propagation``; secret-shared aggregation:
``GNN4FR._aggregate`` over :mod:`fedgraphrec.crypto.sharing`.
"""

from fedgraphrec.protocols.gnn4fr.protocol import GNN4FR

__all__ = ["GNN4FR"]
