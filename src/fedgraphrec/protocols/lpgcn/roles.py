"""Names both LP-GCN roles share: roles, stages, message parts, kinds and ledger phases.

One module, as Flower keeps SecAgg+'s ``Stage`` and ``Key``: the server program asks for a stage
by name, the client program answers in ``stage_<name>`` (:func:`~fedgraphrec.protocols.base.stage_method`),
and every part travels under a phase name that is the same in code, ledger and transcripts
(spec ``lpgcn.md`` §4.10 lists the messages). The order in which a node accepts the stages, and
what it expects in each, is declared in :mod:`~fedgraphrec.protocols.lpgcn.expect`.
"""

from __future__ import annotations

__all__ = [
    "AGGREGATE",
    "BACKWARD",
    "CONV_CLIENT",
    "FINAL",
    "FORWARD",
    "LAYER0",
    "LOSS",
    "SETUP_DEGREES",
    "SETUP_INIT",
    "SETUP_KEYS",
    "SETUP_TOKENS",
    "SETUP_UNHELD",
    "SETUP_VERIFY",
    "SETUP_WRAP",
    "UPDATE",
    "item_phase",
    "user_phase",
]

CONV_CLIENT = "conv-client"
"""A client that convolves at least one item (:math:`\\tilde u`)."""

# ---------------------------------------------------------------- stages, in the order they run
SETUP_KEYS = "setup/keys"
"""Algorithm 2 lines 1-4, 8-11: key pairs, virtual items, upload order; public keys up."""
SETUP_WRAP = "setup/wrap"
"""Algorithm 2 lines 5-6: the key-client draws S and wraps it for every public key."""
SETUP_TOKENS = "setup/tokens"
"""Algorithm 2 lines 7, 12-14: clients unwrap S, upload item tokens and sealed degrees."""
SETUP_UNHELD = "setup/unheld"
"""The key-client names the items nobody holds (the server owns them, spec §11.17)."""
SETUP_VERIFY = "setup/verify"
"""Algorithm 3 and Algorithm 2 lines 16-18: assignment, verification questions and answers."""
SETUP_INIT = "setup/init"
"""Convolution-clients learn their real neighbours, degrees and initial rows."""
SETUP_DEGREES = "setup/degrees"
"""Holders learn their items' real degrees (spec §11.2), hence every weight :math:`c_{ui}`."""
LAYER0 = "train/layer0"
"""Layer-0 rows: users' (or Eq. 6 from W), convolution-items' (Alg. 1 lines 3-6)."""
FORWARD = "train/forward"
"""Algorithm 4, one layer."""
LOSS = "train/loss"
"""Algorithms 5 and 9: local BPR and direct gradients."""
AGGREGATE = "train/aggregate"
"""Eqs. 16-17: convolution-items sum their direct gradients; layer-L gradients out."""
BACKWARD = "train/backward"
"""Algorithm 6, one layer; at layer 0 every owner runs Adam."""
UPDATE = "train/update"
"""Algorithm 7 lines 10-16 (LightGCN+): the gradient of W."""
FINAL = "predict/final"
"""§4.6: the server publishes every final item embedding; clients rank locally."""


def user_phase(prefix: str, kind: str, layer: int) -> str:
    """Phase of relayed user rows: ``forward/l=k/user-embeddings`` or ``backward/l=k/user-gradients``."""
    direction, what = (
        ("forward", "user-embeddings") if kind == "embedding" else ("backward", "user-gradients")
    )
    return f"{prefix}{direction}/l={layer}/{what}"


def item_phase(prefix: str, kind: str, layer: int) -> str:
    """Phase of synchronised item rows (``sync/l=0``, ``forward/l=k/item-embeddings``, ``backward/...``)."""
    if kind == "embedding":
        return f"{prefix}sync/l=0" if layer == 0 else f"{prefix}forward/l={layer}/item-embeddings"
    return f"{prefix}backward/l={layer}/item-gradients"
