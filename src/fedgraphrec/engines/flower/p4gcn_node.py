"""P4GCN on Flower, the SuperNode side: one organisation's program per node.

Which organisation a SuperNode is comes from its own configuration (``--node-config
"organisation='social'"``; in Flower's simulation runtime ``partition-id`` 0 is the recommender, 1
the social platform). Each node hosts its organisation's program
(:class:`~fedgraphrec.protocols.p4gcn.recommender_program.RecommenderProgram` or
:class:`~fedgraphrec.protocols.p4gcn.social_program.SocialProgram`) behind the same
:class:`~fedgraphrec.runtime.endpoint.NodeEndpoint` as in process (:func:`handle_p4gcn`). Between
messages it keeps the program's state in ``context.state``, the large public HE context in a
node-local file named by its SHA-256 (:data:`CACHE_DIR`). The ServerApp side (the coordinator) is
:mod:`fedgraphrec.engines.flower.p4gcn`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, RecordDict
from flwr.app import Message as FlowerMessage
from flwr.clientapp import ClientApp

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Ratings
from fedgraphrec.protocols.p4gcn.recommender_program import RecommenderData, RecommenderProgram
from fedgraphrec.protocols.p4gcn.roles import NODE_OF, ORGANISATIONS, RECOMMENDER
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.protocols.p4gcn.social_program import SocialData, SocialProgram
from fedgraphrec.protocols.p4gcn.wire import he_from_context, make_he
from fedgraphrec.runtime.endpoint import NodeEndpoint
from fedgraphrec.runtime.expect import FlowState
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.network import CryptoMode
from fedgraphrec.training.p4gcn_learner import SHUFFLE_SEED, rating_splits, shuffled_social

__all__ = ["CACHE_DIR", "PROTOCOL", "handle_p4gcn", "make_p4gcn_client_app", "organisation_of", "p4gcn_query"]

PROTOCOL = "p4gcn"
_RUN = "p4gcn.run"
_STATE = "p4gcn.state"


def organisation_of(node_config: Mapping[str, Any]) -> str:
    """The organisation this SuperNode is: ``organisation`` of its node config, else by ``partition-id``.

    Raises:
        ValueError: neither names one of the two organisations.
    """
    org = node_config.get("organisation")
    if org is None and "partition-id" in node_config:
        pid = int(node_config["partition-id"])
        org = ORGANISATIONS[pid] if 0 <= pid < len(ORGANISATIONS) else None
    if org not in ORGANISATIONS:
        raise ValueError(
            f"p4gcn node: node-config 'organisation' must be one of {ORGANISATIONS}; got {org!r}"
        )
    return str(org)


@lru_cache(maxsize=2)
def _dataset(name: str, options: str = "{}") -> Ratings:
    """The dataset ``name`` with ``options`` (JSON, e.g. a synthetic generator's sizes), once per process."""
    data = load_dataset(name, **json.loads(options))
    if not isinstance(data, Ratings) or data.social is None:
        raise ValueError(f"dataset {name!r}: P4GCN needs explicit ratings and a social graph")
    return data


def _program(
    org: str,
    settings: P4GCNSettings,
    dataset: str,
    seed: int,
    arrays: Mapping[str, np.ndarray],
    options: str = "{}",
) -> RecommenderProgram | SocialProgram:
    """This node's program, built from its own data (the recommender: ratings; the social: the graph).

    Ciphertexts cross the process boundary as the backend's serialised bytes. The recommender's keys
    are drawn at its first message and kept in its state (``he_secret``); the social platform's
    public context arrives with the set-up and is kept in its state (``he_public``).

    Raises:
        ValueError: a backend whose keys cannot cross processes yet (``paillier``, ``ckks-packed``).
    """
    if settings.backend not in ("plain", "ckks"):
        raise ValueError(
            f"backend {settings.backend!r}: P4GCN on Flower runs the plain or ckks backend (the others' "
            "keys do not cross processes yet)"
        )
    data = _dataset(dataset, options)
    if org == RECOMMENDER:
        tr, val, te = rating_splits(data, seed)
        own = RecommenderData(
            tr, data.n_users, data.n_items, data.rating_range, seed, {"valid": val, "test": te}
        )
        secret = arrays.get("he_secret")
        backend = (
            make_he(settings.backend, settings.dim)
            if secret is None
            else he_from_context(settings.backend, bytes(np.asarray(secret, np.uint8)))
        )
        return RecommenderProgram(settings, np.array([NODE_OF[org]]), own, backend=backend, serialise=True)
    if settings.social == "shuffled":
        data = shuffled_social(data, seed=SHUFFLE_SEED)
    assert data.social is not None
    social = SocialData(data.social.adjacency(symmetric=True), seed)
    public = make_he("plain", settings.dim) if settings.backend == "plain" else None  # else: from P1
    return SocialProgram(settings, np.array([NODE_OF[org]]), social, backend=public, serialise=True)


CACHE_DIR = Path(os.environ.get("FEDGRAPHREC_NODE_CACHE", Path(tempfile.gettempdir()) / "fedgraphrec-node"))
"""Where a node keeps large public material between messages (``FEDGRAPHREC_NODE_CACHE``)."""


def _to_cache(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The public HE context (tens of MB, public, fixed for the run) to a node-local file.

    The state keeps its SHA-256 instead of carrying it through Flower's context store each message.
    """
    if "he_public" not in arrays:
        return arrays
    blob = np.asarray(arrays["he_public"], np.uint8).tobytes()
    digest = hashlib.sha256(blob).hexdigest()
    path = CACHE_DIR / f"{digest}.ctx"
    if not path.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(blob)
        tmp.replace(path)
    rest = {k: v for k, v in arrays.items() if k != "he_public"}
    return {**rest, "he_public_sha256": np.frombuffer(digest.encode(), dtype=np.uint8).copy()}


def _from_cache(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inverse of :func:`_to_cache`; raises ``IntegrityError`` if the file is missing or altered."""
    if "he_public_sha256" not in arrays:
        return arrays
    digest = np.asarray(arrays["he_public_sha256"], np.uint8).tobytes().decode()
    path = CACHE_DIR / f"{digest}.ctx"
    blob = path.read_bytes() if path.exists() else b""
    if hashlib.sha256(blob).hexdigest() != digest:
        raise IntegrityError(f"p4gcn node: the cached public HE context {path} is missing or altered")
    rest = {k: v for k, v in arrays.items() if k != "he_public_sha256"}
    return {**rest, "he_public": np.frombuffer(blob, dtype=np.uint8).copy()}


def handle_p4gcn(content: RecordDict, state: RecordDict, node_config: Mapping[str, Any]) -> RecordDict:
    """Answer one P4GCN request with this node's stored ``state`` (its organisation's program).

    Raises:
        IntegrityError: a second hello, a stage out of order, a part not the one expected.
        RuntimeError: a request before the hello.
    """
    header, request = decode_message(content)
    run = dict(state.config_records[_RUN]) if _RUN in state.config_records else None
    if "hello" in content.config_records:
        if run is not None:
            raise IntegrityError(f"{header.get('stage')!r}: a second hello; this node's session is fixed")
        hello = content.config_records["hello"]
        run = {k: hello[k] for k in ("settings", "seed", "dataset", "crypto")}
        run["options"] = str(hello.get("options", "{}"))
    if run is None:
        raise RuntimeError(f"{header.get('stage')!r}: this node never got the run's hello")
    settings = P4GCNSettings(**json.loads(str(run["settings"])))
    crypto: CryptoMode = "real" if run["crypto"] == "real" else "accounted"
    stored_state = state.array_records.get(_STATE)
    arrays = _from_cache({k: a.numpy() for k, a in stored_state.items()} if stored_state is not None else {})
    org, options = organisation_of(node_config), str(run.get("options", "{}"))
    program = _program(org, settings, str(run["dataset"]), int(str(run["seed"])), arrays, options)
    if arrays:
        program.load_state_arrays(arrays)
    endpoint = NodeEndpoint(PROTOCOL, crypto)
    endpoint.flow = FlowState.from_record(run)
    stage, step = str(header["stage"]), int(header["step"])
    reply = endpoint.handle(program, stage, step, request)
    run.update(endpoint.flow.to_record())
    stored = _to_cache(program.state_arrays())
    state[_STATE] = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in stored.items()})
    state[_RUN] = ConfigRecord(run)
    return encode_message(reply, {"stage": stage, "step": step})


def p4gcn_query(msg: FlowerMessage, context: Context) -> FlowerMessage:
    """The ``query.party`` handler for P4GCN requests: :func:`handle_p4gcn` on this node's context."""
    return FlowerMessage(handle_p4gcn(msg.content, context.state, dict(context.node_config)), reply_to=msg)


def make_p4gcn_client_app() -> ClientApp:
    """A ClientApp answering P4GCN's ``query.party`` (the simulation's; deployments use ``client_app``)."""
    app = ClientApp()

    @app.query("party")
    def _party(msg: FlowerMessage, context: Context) -> FlowerMessage:
        return p4gcn_query(msg, context)

    return app
