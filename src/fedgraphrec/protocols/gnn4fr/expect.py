"""What a GNN4FR node accepts: its stage order and, per stage, the parts it expects from the server.

Both are computed from the node's own configuration and state (layers, mode, whether it hosts the
key-client, its routing, the cycle in flight), never from the request, so the node
(:class:`~fedgraphrec.runtime.endpoint.NodeEndpoint`) can refuse a stage out of order or repeated,
a part relabelled, downgraded or delivered at another phase (DESIGN.md, "Threat model").

A node's run: set-up (public keys, the key-client's node wraps S, every node unwraps it, the
key-client's node takes custody of the items nobody holds, routing), then cycles, each opened by
``step/begin`` at a new step: a minibatch (``L`` forward layers, negatives, loss, gradients, ``L``
backward layers, and with ``paper_literal`` the secure sum's upload and update) or a prediction
(``L`` forward layers, item upload, delivery, and optionally the federated ``evaluate``). A cycle
must end before the next begins.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.gnn4fr.roles import CLIENT, KEY_HOLDER, Phase, Stage
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.protocols.gnn4fr.state import GNN4FRState
from fedgraphrec.runtime.expect import Expect, Expectation, NodeView, StageFlow, flow
from fedgraphrec.runtime.part import Part

__all__ = ["check_field", "check_rows", "expectation", "gnn4fr_flow"]

PROTOCOL = "gnn4fr"


class GNN4FRNode(NodeView[GNN4FRSettings, GNN4FRState], Protocol):
    """What :func:`expectation` reads of a node's program (:class:`~.client_setup.SetupClient` has it).

    The common view (:class:`~fedgraphrec.runtime.expect.NodeView`), the run's dtype and the
    number of layers ``L``.
    """

    @property
    def dtype(self) -> torch.dtype: ...
    @property
    def L(self) -> int: ...


def gnn4fr_flow(n_layers: int, paper_literal: bool, key_node: bool) -> StageFlow:
    """The stage order of a node (module docstring); ``key_node``: it hosts the key-client."""
    S, L = Stage, n_layers
    after_gradients = [S.BACKWARD] if L else [S.UPLOAD] if paper_literal else [S.BEGIN]
    after: dict[str, list[str]] = {
        S.PUBLIC_KEYS: [S.WRAP_KEY] if key_node else [S.UNWRAP_KEY],
        S.WRAP_KEY: [S.UNWRAP_KEY],
        S.UNWRAP_KEY: [S.CATALOGUE] if key_node else [S.ROUTING],
        S.CATALOGUE: [S.ROUTING],
        S.ROUTING: [S.BEGIN],
        S.BEGIN: [S.FORWARD] if L else [S.NEGATIVES, S.PREDICT_ITEMS],
        S.FORWARD: [S.FORWARD, S.NEGATIVES, S.PREDICT_ITEMS],
        S.NEGATIVES: [S.LOSS],
        S.LOSS: [S.GRADIENTS],
        S.GRADIENTS: after_gradients,
        S.BACKWARD: [S.BACKWARD, S.UPLOAD if paper_literal else S.BEGIN],
        S.UPLOAD: [S.UPDATE],
        S.UPDATE: [S.BEGIN],
        S.PREDICT_ITEMS: [S.PREDICT_DELIVER],
        S.PREDICT_DELIVER: [S.BEGIN, S.EVALUATE],
        S.EVALUATE: [S.BEGIN],
    }
    absent = set()
    if not key_node:
        absent |= {S.WRAP_KEY, S.CATALOGUE}
    if not L:
        absent |= {S.FORWARD, S.BACKWARD}
    if not paper_literal:
        absent |= {S.UPLOAD, S.UPDATE}
    rules = {k: [s for s in v if s not in absent] for k, v in after.items() if k not in absent}
    return flow(first=[S.PUBLIC_KEYS], after=rules, new_step=[S.BEGIN], repeats={S.FORWARD: L, S.BACKWARD: L})


def _fail(stage: str, what: str) -> IntegrityError:
    return IntegrityError(f"{PROTOCOL} stage {stage!r}: {what}")


def check_field(stage: str, fields: dict[str, Any], name: str, want: Any) -> None:
    """A request field the node knows itself must carry the node's own value.

    Raises:
        IntegrityError: naming the stage, the field, what arrived and what the node expects.
    """
    got = fields.get(name)
    if got != want:
        raise _fail(stage, f"field {name!r} = {got!r}; this node expects {want!r}")


def check_rows(stage: str, part: Part, dtype: torch.dtype, width: int) -> None:
    """Rows of a part whose count only the senders know: the node's dtype and width, never cast.

    Raises:
        IntegrityError: naming the stage, the phase and what differs.
    """
    n = len(part.receivers) if part.receivers is not None else 0
    if not n:
        return
    value = torch.as_tensor(part.value)
    if value.dtype != dtype or value.dim() != 2 or int(value.shape[1]) != width:
        raise _fail(
            stage,
            f"{part.phase} holds {value.dtype} rows of shape {tuple(value.shape)}; this node expects "
            f"{dtype} rows of width {width}",
        )


def _rows(phase: str, kind: str, count: int, dtype: torch.dtype, width: int, named: bool = False) -> Expect:
    """Sealed rows relayed from clients; their dtype and width are checked when any is due.

    ``named``: the rows are bound to sender names the program checks itself (an item's holder
    known by the item, a gradient by its triple: ``client.py``).
    """
    return Expect(
        phase, "sealed", kind=kind, shape="rows", from_role=CLIENT,
        dtype=dtype if count else None, width=width if count else None, named_senders=named,
    )  # fmt: skip


def _forward_done(prog: GNN4FRNode, stage: str, predict: bool) -> None:
    st = prog.state.step
    if st.complete or st.predict != predict:
        cycle = "prediction" if predict else "minibatch"
        raise _fail(stage, f"belongs to a {cycle}, and none is in flight on this node")
    if int(st.u_layers.shape[0]) != prog.L + 1:
        raise _fail(stage, f"the forward pass ran {int(st.u_layers.shape[0]) - 1} of {prog.L} layers")


def expectation(prog: GNN4FRNode, stage: str) -> Expectation:
    """The parts ``prog`` expects in ``stage``, from its own state and :attr:`occurrence`.

    Raises:
        IntegrityError: the stage does not fit the cycle in flight (a cycle begun before the last
            ended, negatives in a prediction, an upload before every backward layer).
    """
    S, P = Stage, Phase
    st, L, dt = prog.state.step, prog.L, prog.dtype
    d = int(prog.state.users.param.shape[1])
    k = prog.occurrence
    graph = prog.state.graph
    n_nb = 0 if graph is None else len(graph.nb_ids)
    if stage in (S.PUBLIC_KEYS, S.EVALUATE):
        return {}
    if stage == S.WRAP_KEY:
        return {"keys": Expect(P.PUBLIC_KEYS, kind="public_key", shape="blobs")}
    if stage == S.UNWRAP_KEY:
        return {
            "wrapped": Expect(
                P.WRAPPED_KEY,
                "sealed",
                kind="wrapped_key",
                shape="blobs",
                from_role=KEY_HOLDER,
                presealed=True,
            )
        }
    if stage == S.CATALOGUE:
        return {"held": Expect(P.CATALOGUE, "pseudonymous", kind="item_token", shape="blobs")}
    if stage == S.ROUTING:
        return {"routing": Expect(P.NEIGHBOURS, kind="graph", shape="blobs")}
    if stage == S.BEGIN:
        if not st.complete:
            raise _fail(stage, "the node's last cycle did not end; a new one cannot begin")
        return {}
    if stage == S.FORWARD:
        prefix = "predict/forward" if st.predict else "forward"
        return {"rows": _rows(P.forward(k, prefix), "user_embedding", n_nb, dt, d)}
    if stage in (S.NEGATIVES, S.PREDICT_ITEMS):
        _forward_done(prog, stage, predict=stage == S.PREDICT_ITEMS)
        return {}
    if stage == S.LOSS:
        return {
            "embeddings": _rows(
                P.NEGATIVE_EMBEDDINGS, "item_embedding", len(st.req_user), dt, (L + 1) * d, named=True
            )
        }
    if stage == S.GRADIENTS:
        if prog.settings.paper_literal:
            return {
                "grads": Expect(
                    P.NEGATIVE_GRADIENTS, "sealed", kind="item_gradient", shape="blobs", from_role=CLIENT
                )
            }
        return {"grads": _rows(P.ITEM_GRADIENTS, "item_gradient", 0, dt, d, named=True)}  # count: senders'
    if stage == S.BACKWARD:
        phase = P.neighbour_gradients(L - k) if prog.settings.paper_literal else P.user_gradients(L - k)
        return {"rows": _rows(phase, "user_gradient", n_nb, dt, d)}
    if stage == S.UPLOAD:
        if st.backward != L:
            raise _fail(stage, f"the backward pass ran {st.backward} of {L} layers")
        return {"shares": Expect(P.SHARES, "sealed", kind="gradient_share", shape="blobs", from_role=CLIENT)}
    if stage == S.UPDATE:
        return {"sum": Expect(P.SUM, kind="item_gradient", shape="broadcast", dims=(prog.n_items * d,))}
    if stage == S.PREDICT_DELIVER:
        lacking = len(prog.clients) * prog.n_items - len(prog.state.own_seq)
        return {"items": _rows(P.PREDICT_ITEMS, "item_embedding", lacking, dt, d, named=True)}
    raise _fail(stage, "this node's protocol has no such stage")
