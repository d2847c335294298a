"""A SuperNode's side of every party-program protocol: one ClientApp query, ``query.party``.

For each message the node rebuilds the protocol's
:class:`~fedgraphrec.protocols.base.ClientProgram` for the clients it hosts, restores the program's
typed state and its endpoint's last step from ``context.state`` (:mod:`fedgraphrec.runtime.state`),
answers through :class:`~fedgraphrec.runtime.endpoint.NodeEndpoint` — the same opening and sealing as
the in-process engine — stores the state back and replies. No protocol has code here: the protocol
name in the header picks the :class:`~fedgraphrec.protocols.base.ProtocolSpec` from the registry
(:mod:`fedgraphrec.protocols.registry`, plus what the ClientApp was built with). The
reply holds the program's reply and nothing else.

The first message a node gets carries its *hello*: the run configuration (a
:class:`~fedgraphrec.training.TrainConfig` as JSON) and the ids of the clients it hosts; the node
keeps both, so every later message runs under the same settings. The hello fixes the session once
per run: a second one is refused, and so is one whose protective settings (crypto mode,
secure-aggregation threshold, minimum sum size and semi-honest opt-in, local-DP noise scale:
:data:`PROTECTIVE`) are weaker than the node's own
``--node-config`` or, where the operator set none, the library's defaults.

Simulation shortcuts that remain, stated plainly:

* every node loads the whole dataset named by the configuration (cached per process) and its
  programs keep only their clients' rows; a deployment would have each client bring its own;
* the initial tables are regenerated on every node: from the public ``init`` stream of the run seed
  in ``reproducible`` runs, else (secure init, the default under ``--crypto real``) from the 32-byte
  key the ServerApp drew from :func:`os.urandom` and sent in the hello (``init_key``): nothing in
  the run folder regenerates them, but the ServerApp process knows them (see
  ``FlowerLearner.connect``);
* the server replays the in-process sampler's triples for minibatch protocols, so it knows them.

:data:`EXPORT_STAGE` (tests only, off unless the ClientApp is built with ``allow_export=True``)
returns the shard's final representations in the clear so a test can compare them with the
in-process run: it breaks the protocol's privacy by design.

:data:`~fedgraphrec.engines.flower.node_output.RECOMMEND_STAGE` is the run's last request: the node
writes its own users' recommendations where its operator said (:mod:`.node_output`), replies with
counts only, and refuses every later request.
"""

from __future__ import annotations

import json
import os
import signal
import typing
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, RecordDict
from flwr.app import Message as FlowerMessage
from flwr.clientapp import ClientApp

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.data.types import Interactions
from fedgraphrec.engines.flower.node_output import (
    ENDED,
    RECOMMEND_STAGE,
    NodeOutput,
    check_recommend,
    write_node_output,
)
from fedgraphrec.protocols.base import EVALUATE_STAGE, ClientProgram, NodeData
from fedgraphrec.protocols.registry import REGISTRY, ProtocolEntry, resolve_refs
from fedgraphrec.runtime.endpoint import NodeEndpoint
from fedgraphrec.runtime.expect import FlowState
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import KeyUsage
from fedgraphrec.runtime.state import state_from_arrays, state_to_arrays
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import secure_init
from fedgraphrec.training.loading import config_from_dict
from fedgraphrec.training.protocol_learner import node_data, protocol_spec

__all__ = ["EXPORT_STAGE", "PROTECTIVE", "check_hello", "handle_party", "make_client_app", "party_query"]

EXPORT_STAGE = "~export"
"""Tests only: the node returns its clients' final representations in the clear (module docstring)."""

_RUN = "party.run"
_STATE = "party.state"


@lru_cache(maxsize=2)
def _interactions(cfg_json: str) -> Interactions:
    """The run's dataset as this node loads it (once per process: an actor serves many messages)."""
    from fedgraphrec.training.data import prepare_interactions

    return prepare_interactions(config_from_dict(json.loads(cfg_json)))


@lru_cache(maxsize=2)
def _node_data(cfg_json: str, init_key: str = "") -> NodeData:
    """The node's view of the run's data (loaded once per process: an actor serves many messages).

    ``init_key`` (hex, from the hello; empty in seeded runs) keys the secure initial tables, so
    every process of every node derives the same tables whenever it rebuilds them.
    """
    cfg = config_from_dict(json.loads(cfg_json))
    if secure_init(cfg) and not init_key:  # fresh tables per process would differ between messages
        raise RuntimeError("hello: this run draws secure initial tables but the hello carries no init_key")
    return node_data(cfg, _interactions(cfg_json), init_key=bytes.fromhex(init_key) if init_key else None)


def _state_class(program: ClientProgram[Any]) -> type:
    """The program's state dataclass (from the instance, or from ``ClientProgram[State]``)."""
    if hasattr(program, "state"):
        return type(program.state)
    for base in getattr(type(program), "__orig_bases__", ()):
        args = typing.get_args(base)
        if args and isinstance(args[0], type):
            return args[0]
    raise TypeError(f"{type(program).__name__}: cannot tell its state dataclass")


PROTECTIVE: dict[str, str] = {
    "crypto": "equal",
    "secagg_threshold": "at least",
    "secagg_semi_honest": "at most",
    "secagg_min_clients": "at least",
    "ldp_scale": "at least",
}
"""Run settings that protect this node's clients, and how the hello's value must compare with the
node's own (``node_config``, else the library's default): a hello that asks for less is refused."""


def _own_setting(node_config: Mapping[str, Any], name: str) -> Any:
    """The node operator's value of a protective setting (``--node-config``), else ``None``."""
    for key in (name, name.replace("_", "-")):
        if key in node_config:
            return node_config[key]
    return None


def check_hello(cfg: TrainConfig, node_config: Mapping[str, Any]) -> None:
    """Refuse a hello whose protective settings are weaker than the node's own configuration.

    ``crypto`` must equal the node's ``crypto`` when the node operator set one (otherwise the first
    hello fixes it for the run); the secure-aggregation threshold and minimum sum size and the
    local-DP noise scale (FedPerGNN's ``ldp_scale``) may not be lower, and the semi-honest opt-in may
    not be on unless the node's own configuration allows it (defaults: the library's, so a node
    nobody configured still refuses a lowered threshold).

    Raises:
        IntegrityError: naming the setting, what the server asked and what the node requires.
    """
    defaults = type(cfg.protocol_settings)()
    for name, rule in PROTECTIVE.items():
        if not hasattr(defaults, name):  # a setting this protocol does not have protects nothing here
            continue
        own = _own_setting(node_config, name)
        if own is None:
            if name == "crypto":
                continue
            own = getattr(defaults, name)
        asked = getattr(cfg.protocol_settings, name)
        own = type(asked)(own) if not isinstance(asked, bool) else str(own).lower() in ("1", "true", "yes")
        weaker = asked != own if rule == "equal" else asked < own if rule == "at least" else asked > own
        if weaker:
            raise IntegrityError(
                f"hello: the server asks for {name} = {asked!r}; this node's configuration requires "
                f"{'' if rule == 'equal' else rule + ' '}{own!r}"
            )


def handle_party(
    content: RecordDict,
    state: RecordDict,
    specs: Mapping[str, str | ProtocolEntry] | None = None,
    allow_export: bool = False,
    node_config: Mapping[str, Any] | None = None,
    output: NodeOutput | None = None,
) -> RecordDict:
    """Answer one request (``content``) with the node's stored ``state``; returns the reply's content.

    The session is fixed by the first hello, once per run: a second hello (which would reset the
    node's stage order and crypto mode) is refused, and so is a hello whose protective settings are
    weaker than the node's own configuration (``node_config``; :func:`check_hello`). It ends with
    the recommendation request, which writes the node's users' lists to ``output`` (the node
    operator's choice; ``None``: nothing is written) and after which every request is refused.

    Raises:
        RuntimeError: a request reached the node before its hello, or names another protocol.
        PermissionError: an export request to a node that does not allow it.
        IntegrityError: a second hello, a hello asking for weaker protection, a stage out of
            order, or a sealed message that was tampered with, replayed or re-routed.
    """
    for name, entry in (specs or {}).items():  # the protocols this ClientApp was built with serve here too
        REGISTRY[name] = entry if isinstance(entry, ProtocolEntry) else resolve_refs({name: entry})[name]
    header, request = decode_message(content)
    run = dict(state.config_records[_RUN]) if _RUN in state.config_records else None
    if "hello" in content.config_records:
        if run is not None:
            raise IntegrityError(
                f"{header.get('stage')!r}: a second hello; this node's session (protocol, crypto mode, "
                "clients, stage order) is fixed once per run"
            )
        hello = content.config_records["hello"]
        check_hello(config_from_dict(json.loads(str(hello["config"]))), node_config or {})
        clients: Any = hello["clients"]
        run = {"config": str(hello["config"]), "clients": list(clients)}
        run["init_key"] = str(hello["init_key"]) if "init_key" in hello else ""
    if run is None:
        raise RuntimeError(f"{header.get('stage')!r}: this node never got the run's hello")
    if run.get(ENDED) and header.get("stage") != RECOMMEND_STAGE:
        raise IntegrityError(f"{header.get('stage')!r}: this node's session ended with its recommendations")
    cfg_json = str(run["config"])
    cfg = config_from_dict(json.loads(cfg_json))
    spec = protocol_spec(cfg.protocol)
    if header.get("protocol") != spec.name:
        raise RuntimeError(
            f"the request is for protocol {header.get('protocol')!r}, this run is {spec.name!r}"
        )
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    clients = np.asarray(run["clients"], dtype=np.int64)
    program = spec.client(cfg.program_settings(), clients, _node_data(cfg_json, str(run.get("init_key", ""))))
    if _STATE in state.array_records:
        arrays = {k: a.numpy() for k, a in state.array_records[_STATE].items()}
        program.state = state_from_arrays(_state_class(program), arrays)
    stage, step = str(header["stage"]), int(header["step"])
    if stage == EXPORT_STAGE:
        if not allow_export:
            raise PermissionError("this node does not export its clients' representations")
        reply = _export(program)
    elif stage == RECOMMEND_STAGE:
        check_recommend(spec.name, run, program.stage_flow(), step)
        done = {"step": step, "evaluations": int(str(run.get("evaluations", 0)))}
        reply = write_node_output(spec.name, program, request, _interactions(cfg_json), output, done)
        run[ENDED] = 1
    else:
        # the stage order and the per-key message count live for the run, not for this message
        usage = KeyUsage(int(run.get("sealed_step", -(1 << 62))), int(run.get("sealed_count", 0)))  # type: ignore[arg-type]
        endpoint = NodeEndpoint(spec.name, "real" if cfg.crypto == "real" else "accounted", usage=usage)
        endpoint.flow = FlowState.from_record(run)
        reply = endpoint.handle(program, stage, step, request)
        run.update(endpoint.flow.to_record())
        run["sealed_step"], run["sealed_count"] = usage.step, usage.sealed
        if stage == EVALUATE_STAGE:  # what the node's recommendations follow (node.json)
            run["evaluations"] = int(str(run.get("evaluations", 0))) + 1
    if hasattr(program, "state"):
        stored = state_to_arrays(program.state)
        state[_STATE] = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in stored.items()})
    state[_RUN] = ConfigRecord(run)
    return encode_message(reply, {"stage": stage, "step": step})


def _export(program: ClientProgram[Any]) -> Message:
    ids, users, items = program.prediction()
    out = Message().add(
        "users",
        Part("export/users", "exported_user_embedding", "client", "server", users, senders=ids),
    )
    if items is not None:
        out.add(
            "items", Part("export/items", "exported_item_embedding", "client", "server", items, "broadcast")
        )
    return out


def party_query(
    msg: FlowerMessage,
    context: Context,
    specs: Mapping[str, str | ProtocolEntry] | None = None,
    allow_export: bool = False,
    output: NodeOutput | None = None,
) -> FlowerMessage:
    """The ``query.party`` handler: :func:`handle_party` on the message and the node's context.

    The node's output at the end of training comes from its ``--node-config`` (``out-dir``,
    ``recommend-k``, ``export-embeddings``, ``node-name``) over ``output`` (the ClientApp's default;
    :meth:`NodeOutput.resolve`), named by ``node-name``, else Flower's ``partition-id``, else its
    node id. It is read on every message, so a malformed one fails the node's first message: the run
    stops before training, not after it.

    For fault tests, ``node_config["crash-at"] = "<stage>|<step>"`` kills this SuperNode's process
    group when that request arrives (start the SuperNode in a session of its own, as
    :func:`~fedgraphrec.engines.flower.local.local_federation` does).
    """
    crash = str(context.node_config.get("crash-at", ""))
    if crash and "header" in msg.content.config_records:
        header = msg.content.config_records["header"]
        if crash == f"{header.get('stage')!s}|{header.get('step')!s}":
            os.killpg(os.getpgrp(), signal.SIGKILL)
    node_config = dict(context.node_config)
    own = NodeOutput.resolve(node_config, output, str(context.node_id))
    content = handle_party(msg.content, context.state, specs, allow_export, node_config, own)
    return FlowerMessage(content, reply_to=msg)


def make_client_app(
    specs: Mapping[str, str] | None = None, allow_export: bool = False, output: NodeOutput | None = None
) -> ClientApp:
    """A ClientApp serving ``query.party`` for this process's protocols and ``specs``.

    ``specs``: ``name -> "module:attr"`` of a :class:`~fedgraphrec.protocols.registry.ProtocolEntry`.

    ``allow_export`` lets the server fetch the clients' final representations in the clear
    (:data:`EXPORT_STAGE`): for tests comparing engines only.

    ``output``: where every node of this ClientApp writes its users' recommendations at the end of
    training, unless its ``--node-config`` says otherwise (``flower simulate``'s simulated nodes).
    """
    app = ClientApp()
    extra: dict[str, str | ProtocolEntry] = {**REGISTRY, **(specs or {})}  # what this process registered

    @app.query("party")
    def _party(msg: FlowerMessage, context: Context) -> FlowerMessage:
        return party_query(msg, context, extra, allow_export, output)

    return app
