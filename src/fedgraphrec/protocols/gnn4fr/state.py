"""A GNN4FR node's typed state: its clients' rows, its item copies, keys, graph and the step in flight."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedgraphrec.protocols.gnn4fr.graph import LocalGraph
from fedgraphrec.protocols.optim import adam_step
from fedgraphrec.runtime.state import SECRET

__all__ = ["Adam", "GNN4FRState", "StepState"]

_EMPTY = np.zeros(0, dtype=np.int64)


def _empty() -> np.ndarray:
    return _EMPTY.copy()


def _none() -> torch.Tensor:
    return torch.zeros(0)


@dataclass
class Adam:
    """A block of rows with its Adam moments (elementwise, so shards add up); the node's state."""

    param: torch.Tensor
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    steps: int = 0

    @classmethod
    def of(cls, rows: torch.Tensor) -> Adam:
        """Fresh moments for ``rows`` (a copy)."""
        p = rows.detach().clone()
        return cls(p, torch.zeros_like(p), torch.zeros_like(p))

    def step(
        self, grad: torch.Tensor, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        """One update with ``grad`` (:func:`~fedgraphrec.protocols.optim.adam_step`)."""
        self.steps += 1
        adam_step(self.param, grad, self.exp_avg, self.exp_avg_sq, self.steps, lr, (beta1, beta2), eps)


@dataclass
class StepState:
    """What a node keeps between the rounds of one minibatch (or of a prediction)."""

    users: np.ndarray = field(default_factory=_empty)  # positions of the triples' users in the shard
    pos: np.ndarray = field(default_factory=_empty)  # global ids
    neg: np.ndarray = field(default_factory=_empty)
    batch: int = 0
    predict: bool = False  # a prediction cycle (Algorithm 6), not a minibatch
    backward: int = 0  # backward layers done
    complete: bool = True  # the cycle ran to its last stage (a new one may begin)
    u_layers: torch.Tensor = field(default_factory=_none)  # (L + 1, clients, d)
    v_layers: torch.Tensor = field(default_factory=_none)  # (L + 1, node items, d)
    req_user: np.ndarray = field(default_factory=_empty)  # negative requests: client position, item
    req_item: np.ndarray = field(default_factory=_empty)
    d_user: torch.Tensor = field(default_factory=_none)  # dL/dU of the clients' combined rows
    r_user: torch.Tensor = field(default_factory=_none)  # their layer-0 regulariser gradient
    d_item: torch.Tensor = field(default_factory=_none)  # total direct gradient of every node item
    r_item: torch.Tensor = field(default_factory=_none)  # and its regulariser gradient
    g_user: torch.Tensor = field(default_factory=_none)  # gradient of the current layer
    g_item: torch.Tensor = field(default_factory=_none)
    # paper-literal Algorithm 5: per-edge shares of the node's clients
    d_edge: torch.Tensor = field(default_factory=_none)
    r_edge: torch.Tensor = field(default_factory=_none)
    g_edge: torch.Tensor = field(default_factory=_none)
    kept: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.uint64))


@dataclass
class GNN4FRState:
    """Everything a node holds (module docstring); private keys never leave it."""

    users: Adam
    items: Adam
    item_ids: np.ndarray
    own_ptr: np.ndarray = field(default_factory=_empty)  # client k's items: own_seq[own_ptr[k]:own_ptr[k+1]]
    own_seq: np.ndarray = field(default_factory=_empty)  # (global ids, in each client's token order)
    real: bool = False  # real crypto mode (told at set-up)
    # the clients' X25519 private keys (32 bytes each)
    private_keys: bytes = field(default=b"", metadata=SECRET)
    key: bytes = field(default=b"", metadata=SECRET)  # the group key S, once unwrapped
    graph: LocalGraph | None = None
    custody_ids: np.ndarray = field(default_factory=_empty)  # items nobody holds (the key-client keeps them)
    custody: Adam | None = None
    catalogue_tokens: np.ndarray = field(default_factory=_empty)  # token handle of every item id
    step: StepState = field(default_factory=StepState)
    final_users: torch.Tensor = field(default_factory=_none)
    final_items: torch.Tensor = field(default_factory=_none)
