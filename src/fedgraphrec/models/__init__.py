"""Centralized reference models (the oracles every lossless protocol is tested against)."""

from fedgraphrec.models.base import BatchLoss, GraphRecommender
from fedgraphrec.models.lightgcn import LightGCN, LightGCNPlus
from fedgraphrec.models.losses import bpr_loss, l2_reg
from fedgraphrec.models.mf import BPRMF
from fedgraphrec.models.ncf import NCF
from fedgraphrec.models.ngcf import NGCF
from fedgraphrec.models.propagation import NormalizedBipartite, propagate, propagate_layers

__all__ = [
    "BPRMF",
    "NCF",
    "NGCF",
    "BatchLoss",
    "GraphRecommender",
    "LightGCN",
    "LightGCNPlus",
    "NormalizedBipartite",
    "bpr_loss",
    "l2_reg",
    "propagate",
    "propagate_layers",
]
