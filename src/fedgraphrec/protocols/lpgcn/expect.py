r"""What an LP-GCN node accepts: its stage order and, per stage, every part the server may send.

The server relays and labels every message and may lie about all of it (issue 30,
``DESIGN.md`` "Threat model"). A node therefore checks each request against what it expects from
its *own* state, before its program reads anything (:class:`~fedgraphrec.runtime.endpoint.NodeEndpoint`):

* the stage order (:func:`lpgcn_flow`): set-up once, then cycles of ``train/layer0``,
  ``train/forward`` :math:`L` times, ``train/loss``, ``train/aggregate``, ``train/backward``
  :math:`L` times (and ``train/update`` for lossless LightGCN+), or prediction cycles of
  ``train/layer0``, ``train/forward`` :math:`L` times, ``predict/final`` (and ``evaluate``). Every
  cycle runs in a step of its own (the server numbers them, :mod:`.server_train`), so a stage run
  twice in a step is refused by the node's counter; what a static order cannot see — a loss after
  too few layers, a final in a training cycle, a new cycle before the last one finished — the
  program refuses from its own position in the cycle (:class:`~.step.StepState`);
* per stage, the phase (with the layer from :attr:`~fedgraphrec.protocols.base.ClientProgram.occurrence`,
  never from the request), protection, kind, shape, origin role, dtype and width of every part,
  present exactly when the node's own routing says the server has something to send it
  (synchronised item rows when some of its clients hold items convolved by another client,
  relayed user rows when its convolution-items have neighbours);
* request fields the node knows itself (the layer ``k``, the key-client, the roster and item
  counts) are checked against its own values (:meth:`ExpectedParts.known_field`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.common import CLIENT, KEY_HOLDER, SERVER
from fedgraphrec.protocols.lpgcn.client_state import ClientBase
from fedgraphrec.protocols.lpgcn.holdings import key_client_of
from fedgraphrec.protocols.lpgcn.roles import (
    AGGREGATE,
    BACKWARD,
    CONV_CLIENT,
    FINAL,
    FORWARD,
    LAYER0,
    LOSS,
    SETUP_DEGREES,
    SETUP_INIT,
    SETUP_KEYS,
    SETUP_TOKENS,
    SETUP_UNHELD,
    SETUP_VERIFY,
    SETUP_WRAP,
    UPDATE,
    item_phase,
    user_phase,
)
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.protocols.lpgcn.unheld import UNHELD_LIST
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow, flow

__all__ = ["EVALUATE", "ExpectedParts", "lpgcn_flow"]

EVALUATE = "evaluate"
"""The generic federated evaluation stage (:meth:`~fedgraphrec.protocols.base.ServerProgram.evaluate`)."""


def lpgcn_flow(settings: LPGCNSettings) -> StageFlow:
    """The order of an LP-GCN node's stages for this run's :math:`L` and backbone (module docstring)."""
    L = settings.n_layers
    update = settings.plus and not settings.paper_literal
    end_of_training = UPDATE if update else LAYER0
    after: dict[str, set[str]] = {
        SETUP_KEYS: {SETUP_WRAP, SETUP_TOKENS},
        SETUP_WRAP: {SETUP_TOKENS},
        SETUP_TOKENS: {SETUP_UNHELD, SETUP_VERIFY},
        SETUP_UNHELD: {SETUP_VERIFY},
        SETUP_VERIFY: {SETUP_INIT},
        SETUP_INIT: {SETUP_DEGREES},
        SETUP_DEGREES: {LAYER0},
        LAYER0: {FORWARD} if L else {LOSS, FINAL},
        LOSS: {AGGREGATE},
        AGGREGATE: {BACKWARD} if L else {end_of_training},
        FINAL: {EVALUATE, LAYER0},
        EVALUATE: {LAYER0},
    }
    if L:
        after[FORWARD] = {FORWARD, LOSS, FINAL}
        after[BACKWARD] = {BACKWARD, end_of_training}
    if update:
        after[UPDATE] = {LAYER0}
    return flow(first=[SETUP_KEYS], after=after, new_step=[LAYER0], repeats={FORWARD: L, BACKWARD: L})


class ExpectedParts(ClientBase):
    """The node's expectations of every LP-GCN stage (module docstring)."""

    def stage_flow(self) -> StageFlow:
        """:func:`lpgcn_flow` for this run's settings (built once per settings object)."""
        hit = self.__dict__.get("_flow")
        if hit is None or hit[0] is not self.settings:
            hit = self.__dict__["_flow"] = (self.settings, lpgcn_flow(self.settings))
        rules: StageFlow = hit[1]
        return rules

    def _expect(self, *args: Any, **kwargs: Any) -> Expect:
        """``Expect(*args, **kwargs)``, one object per distinct arguments (they are immutable)."""
        memo: dict[tuple[Any, ...], Expect] = self.__dict__.setdefault("_expects", {})
        key = (args, tuple(sorted(kwargs.items())))
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = Expect(*args, **kwargs)
        return hit

    # ------------------------------------------------------------------ checks the stages share
    def refuse(self, stage: str, why: str) -> IntegrityError:
        """An :class:`IntegrityError` naming the stage, the server and this node's clients."""
        ids = self.clients.tolist()
        who = f"clients {ids[0]}..{ids[-1]}" if len(ids) > 1 else f"client {ids[0] if ids else '-'}"
        return IntegrityError(f"lpgcn stage {stage!r} (from the server to the node of {who}): {why}")

    def known_field(self, stage: str, fields: Mapping[str, Any], name: str, own: int) -> int:
        """A request field the node knows itself: it must equal the node's ``own`` value.

        Raises:
            IntegrityError: the field is missing or differs, naming the stage and the field.
        """
        if name not in fields:
            raise self.refuse(stage, f"field {name!r} is missing (this node expects {own})")
        got = fields[name]
        if isinstance(got, bool | np.bool_) or not isinstance(got, numbers.Real) or got != own:
            raise self.refuse(stage, f"field {name!r} = {got!r}; this node expects {own}")
        return own

    def key_client(self) -> int:
        """The key-client, which every node derives from the public settings (Algorithm 2 line 5)."""
        assert self.data is not None, "set-up needs the node's data"
        return key_client_of(self.settings.seed, int(self.data.train.shape[0]))

    def check_roster(self, stage: str, fields: Mapping[str, Any]) -> None:
        """The key-client's fields: the key-client, the numbers of clients and items (all known here)."""
        assert self.data is not None, "set-up needs the node's data"
        n, m = (int(x) for x in self.data.train.shape)
        self.known_field(stage, fields, "key_client", self.key_client())
        self.known_field(stage, fields, "n_clients", n)
        self.known_field(stage, fields, "n_items", m)

    def _in_cycle(self, stage: str, cycle: str, layers: int | None = None, back: int | None = None) -> None:
        """Refuse ``stage`` unless in a ``cycle`` with ``layers`` forward, ``back`` backward layers done."""
        ss = self.state.step
        if ss.cycle != cycle and not cycle:
            raise self.refuse(stage, f"opens a cycle; this node is still in a {ss.cycle} cycle")
        if ss.cycle != cycle:
            now = f"a {ss.cycle} cycle" if ss.cycle else "no cycle"
            raise self.refuse(stage, f"belongs to a {cycle} cycle; this node is in {now}")
        if layers is not None and ss.layer != layers:
            raise self.refuse(stage, f"asked for after {ss.layer} of {layers} forward layer(s)")
        if back is not None and ss.back != back:
            raise self.refuse(stage, f"asked for after {ss.back} of {back} backward layer(s)")

    # ------------------------------------------------------------------ what each stage receives
    def expect(self, stage: str) -> Expectation:
        """The parts ``stage`` expects, from the node's own state and :attr:`occurrence`.

        Raises:
            IntegrityError: the stage does not fit where this node is (a set-up stage meant for
                the key-client's node elsewhere, a stage of another cycle, too few layers done).
        """
        L, ss = self.settings.n_layers, self.state.step
        if stage == SETUP_KEYS:
            return {}
        if stage in (SETUP_WRAP, SETUP_UNHELD) and self.key_client() not in set(self.clients.tolist()):
            raise self.refuse(
                stage, f"only the key-client's node runs it; client {self.key_client()} is not here"
            )
        if stage == SETUP_WRAP:
            return {"public-keys": _blobs("setup/public-keys", "public_key", "plain", SERVER)}
        if stage == SETUP_TOKENS:
            return {"wrapped": _blobs("setup/wrapped-key", "wrapped_key", "asymmetric", KEY_HOLDER)}
        if stage == SETUP_UNHELD:
            return {"held-tokens": _blobs("setup/held-tokens", "item_token", "pseudonymous", SERVER)}
        if stage == SETUP_VERIFY:
            return {
                "unheld-list": _blobs(UNHELD_LIST, "item_token", "sealed", KEY_HOLDER),
                "assignment": _blobs("setup/assignment", "item_token", "pseudonymous", SERVER, optional=True),
                "questions": _blobs("setup/verification-question", "item_token", "pseudonymous", CONV_CLIENT),
                "asker-keys": _blobs("setup/asker-keys", "public_key", "plain", CONV_CLIENT),
            }
        if stage == SETUP_INIT:
            return {
                "answers": _blobs(
                    "setup/verification-answer", "virtual_flag", "asymmetric", CLIENT, optional=True
                ),
                "degrees": _blobs("setup/neighbour-degrees", "user_degree", "sealed", CLIENT, optional=True),
            }
        if stage == SETUP_DEGREES:
            return self._synced(
                "setup/item-degrees",
                "item_degree",
                dtype=torch.float64,
                width=1,
                name="degrees",
                counted=False,
            )
        if stage == LAYER0:
            self._in_cycle(stage, "")
            if not self.settings.plus:
                return {}
            return {"W": self._broadcast("sync/W", "item_embedding")}
        if stage == FORWARD:
            if ss.cycle not in ("train", "predict"):
                self._in_cycle(stage, "train")
            k = self.occurrence + 1
            prefix = "predict/" if ss.predict else ""
            return self._layer_parts(prefix, "embedding", k - 1)
        if stage == LOSS:
            self._in_cycle(stage, "train", layers=L)
            return {
                **self._synced(item_phase("", "embedding", L), "item_embedding"),
                "negatives": self._broadcast("loss/negative-embeddings", "item_embedding"),
            }
        if stage == AGGREGATE:
            self._in_cycle(stage, "train", layers=L)
            width = self.dim + TOKEN_BYTES // torch.empty(0, dtype=self.dtype).element_size()
            grads = self._expect("loss/item-gradients", "sealed", kind="item_gradient", shape="rows",
                                 dtype=self.dtype, width=width, from_role=CLIENT, optional=True)  # fmt: skip
            return {"grads": grads}
        if stage == BACKWARD:
            self._in_cycle(stage, "train", layers=L, back=self.occurrence)
            return self._layer_parts("", "gradient", L - self.occurrence)
        if stage == UPDATE:
            self._in_cycle(stage, "train", layers=L, back=L)
            return self._relayed("update/user-gradients", "user_gradient")
        if stage == FINAL:
            self._in_cycle(stage, "predict", layers=L)
            return {
                **self._synced(item_phase("predict/", "embedding", L), "item_embedding"),
                "final": self._broadcast("predict/item-embeddings", "item_embedding"),
            }
        if stage == EVALUATE:
            self._in_cycle(stage, "")
            return {}
        raise self.refuse(stage, "LP-GCN has no such stage")

    def _layer_parts(self, prefix: str, kind: str, layer: int) -> Expectation:
        """A forward or backward layer's synchronised item rows and relayed user rows.

        Static once set-up has fixed the node's routing, so each layer's is built once (the
        cycle and layer checks still run at every stage, in :meth:`expect`).
        """
        key = f"expect:{prefix}{kind}:{layer}"
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = {
                **self._synced(item_phase(prefix, kind, layer), f"item_{kind}"),
                **self._relayed(user_phase(prefix, kind, layer), f"user_{kind}"),
            }
        expectation: Expectation = hit
        return expectation

    def _broadcast(
        self,
        phase: str,
        kind: str,
        dtype: torch.dtype | None = None,
        width: int | None = None,
        rows: int | None = None,
    ) -> Expect:
        """A plain broadcast the server computes itself (``rows`` rows of the run's dtype and width)."""
        width = width or self.dim
        return self._expect(
            phase, kind=kind, shape="broadcast", dtype=dtype or self.dtype, width=width,
            dims=None if rows is None else (rows, width), from_role=SERVER,
        )  # fmt: skip

    def needs_sync(self) -> bool:
        """Whether the server syncs item rows here: a client holds an item another client convolves."""
        hit = self._cache.get("needs_sync")
        if hit is None:
            st = self.state
            hit = self._cache["needs_sync"] = bool((st.held_owner != self.clients[self.held_rows()]).any())
        return bool(hit)

    def _synced(
        self,
        phase: str,
        kind: str,
        dtype: torch.dtype | None = None,
        width: int | None = None,
        name: str = "items",
        counted: bool = True,
    ) -> dict[str, Expect]:
        """The synchronised item rows, exactly when this node's holdings need some.

        ``counted``: one row per synchronised item (the item rows of every layer, not the set-up
        degrees), a count the node knows from set-up.
        """
        if not self.needs_sync():
            return {}
        rows = len(self.state.sync_items) if counted else None
        return {name: self._broadcast(phase, kind, dtype, width, rows=rows)}

    def _relayed(self, phase: str, kind: str) -> dict[str, Expect]:
        """Sealed user rows relayed to the convolution-clients, exactly when their items have neighbours."""
        if not len(self.state.nb_user):
            return {}
        users = self._expect(
            phase, "sealed", kind=kind, shape="rows", dtype=self.dtype, width=self.dim, from_role=CLIENT
        )
        return {"users": users}


def _blobs(phase: str, kind: str, protection: Any, origin: str, optional: bool = False) -> Expect:
    """A set-up part of byte strings, first sent by ``origin`` (the server, or a client it relays)."""
    return Expect(phase, protection, kind=kind, shape="blobs", from_role=origin, optional=optional)
