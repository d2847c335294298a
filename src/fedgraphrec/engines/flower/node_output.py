"""A SuperNode's own output at the end of training: its users' top-K recommendations (and embeddings).

In a horizontal protocol a user's final representation belongs to its client, so on Flower it stays
on the SuperNode that hosts the client; the ServerApp's run folder never holds it. At the end of
training the ServerApp sends every node one last request, :data:`RECOMMEND_STAGE`, and each node
writes its own users' lists on its own disk, where *its operator* said, and replies with counts only.

What the node decides, and what it checks (the server is untrusted: it picks neither the folder nor
the moment):

* the folder, the list length and whether embeddings are written come from the node's own
  configuration (:class:`NodeOutput`: ``--node-config`` keys ``out-dir``, ``recommend-k``,
  ``export-embeddings``, ``node-name``; in ``flower simulate``, the CLI's default for its simulated
  nodes). A node without ``out-dir`` writes nothing and says so (``written = 0``). The request
  carries only its stage and, as the evaluation request does, the final item table where the server
  holds it (checked against the node's expectation of the ``evaluate`` stage);
* the request must come where the protocol's own stage order accepts a federated evaluation (right
  after the prediction stages) or right after that evaluation, so the clients hold the final
  representations of the model they trained last; and it comes once: it ends the node's session,
  and every later request is refused (:func:`check_recommend`). The node cannot tell that the
  server ran every epoch (stopping, early or not, is the server's call); ``node.json`` records the
  protocol step and how many evaluation rounds the node took part in.

The node writes ``out-dir/node-<name>/``:

* ``recommendations.csv`` — ``user,rank,item,score`` (rank from 1), the dataset's original ids
  (identity when the dataset has none), seen items (the user's train and validation items) never
  recommended, cut by :func:`fedgraphrec.evaluation.recommend.top_k`; a user with no rankable
  item has no row;
* ``embeddings.npz`` (only with ``export-embeddings``) — ``user_ids``, ``users`` (final rows) and,
  when the node holds the final item table, ``item_ids``, ``items``; loads with ``numpy.load``;
* ``node.json`` — what was written and under which rule.

Each run replaces the files of the previous run in the same folder. The lists are the *last*
model's (the epoch the run ended on), not the epoch a validation rule selected: the nodes keep no
copy of an earlier epoch's rows.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.data.types import Interactions
from fedgraphrec.evaluation.recommend import ScoreRows, dot_scores, top_k
from fedgraphrec.protocols.base import EVALUATE_STAGE, ClientProgram
from fedgraphrec.runtime.expect import FlowState, StageFlow, check_content, check_parts
from fedgraphrec.runtime.message import Message

__all__ = ["ENDED", "RECOMMEND_STAGE", "NodeOutput", "check_recommend", "write_node_output"]

RECOMMEND_STAGE = "~recommend"
"""The last request of a run: every node writes its own users' recommendations (module docstring)."""

ENDED = "ended"
"""The key of a node's run record that says its session ended with :data:`RECOMMEND_STAGE`."""

_TRUE = ("1", "true", "yes", "on")
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeOutput:
    """Where and what a node writes at the end of training: its operator's choice, never the server's.

    Attributes:
        out_dir: the folder on the node's machine (the node writes ``out_dir/node-<name>/``).
        k: the length of each user's list.
        embeddings: also write the users' final embeddings (``embeddings.npz``).
        name: the node's folder name (default: Flower's ``partition-id`` in simulation, else its node id).
    """

    out_dir: Path
    k: int = 20
    embeddings: bool = False
    name: str = ""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"recommend-k must be at least 1, got {self.k}")
        if self.name and not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise ValueError(f"node-name {self.name!r}: use letters, digits, '_', '.' and '-' only")

    @classmethod
    def resolve(
        cls, node_config: Mapping[str, Any], default: NodeOutput | None = None, fallback_name: str = ""
    ) -> NodeOutput | None:
        """The node's output from its ``--node-config`` keys, over ``default`` (``None``: write nothing).

        Keys: ``out-dir`` (a folder), ``recommend-k`` (list length, default 20), ``export-embeddings``
        (``true``/``false``), ``node-name`` (the folder's name; else ``partition-id``, else
        ``fallback_name``).

        Raises:
            ValueError: ``recommend-k`` is not a positive integer, or ``node-name`` is not a plain name.
        """
        out = node_config.get("out-dir", default.out_dir if default else None)
        if out is None or str(out) == "":
            return None
        k_raw = node_config.get("recommend-k", default.k if default else 20)
        try:
            k = int(k_raw)
        except (TypeError, ValueError):
            raise ValueError(f"recommend-k must be an integer, got {k_raw!r}") from None
        emb = node_config.get("export-embeddings", default.embeddings if default else False)
        name = node_config.get("node-name", default.name if default and default.name else None)
        if name is None:
            name = node_config.get("partition-id", fallback_name)
        return cls(Path(str(out)), k, str(emb).lower() in _TRUE, str(name))


def check_recommend(protocol: str, run: Mapping[str, Any], rules: StageFlow | None, step: int) -> None:
    """Accept the recommendation request only after the prediction stages, and once per run.

    Raises:
        IntegrityError: the node's last stage is not one after which the protocol accepts a
            federated evaluation (nor that evaluation), the step went back, or the session ended.
    """
    where = f"{protocol} stage {RECOMMEND_STAGE!r} at step {step}"
    if run.get(ENDED):
        raise IntegrityError(f"{where}: this node already wrote its recommendations; its session ended")
    flow = FlowState.from_record(run)
    after = rules.after.get(flow.stage, frozenset()) if rules is not None else frozenset()
    if flow.step is None or not (flow.stage == EVALUATE_STAGE or EVALUATE_STAGE in after):
        raise IntegrityError(
            f"{where}: recommendations follow the prediction stages of the last epoch; this node's last "
            f"stage was {flow.stage or 'none'!r}"
        )
    if step < flow.step:
        raise IntegrityError(f"{where}: the server asked for step {step} after step {flow.step}")


def _request_items(protocol: str, program: ClientProgram[Any], request: Message) -> None:
    """Check the request's parts as the node checks an evaluation request (plain parts only)."""
    expected = program.begin_stage(EVALUATE_STAGE, 0) or {}
    check_parts(protocol, RECOMMEND_STAGE, expected, request.parts)
    for name, part in request.parts.items():
        if part.protection != "plain":
            raise IntegrityError(f"{protocol} stage {RECOMMEND_STAGE!r}: part {name!r} is not plain")
        check_content(protocol, RECOMMEND_STAGE, name, expected[name], part)


def _scores(
    program: ClientProgram[Any], request: Message
) -> tuple[np.ndarray, ScoreRows, tuple[torch.Tensor, torch.Tensor] | None]:
    """``(client ids, score rows by position, (U, V) or None)``: how this shard ranks items."""
    scorer = program.scorer(request)
    if scorer is not None:  # models that do not score by a dot product (NeuMF)
        return program.clients, scorer, None
    ids, U, V = program.prediction()
    if "items" in request:
        V = torch.as_tensor(request["items"].value)
    if V is None:
        raise RuntimeError(f"{RECOMMEND_STAGE}: no final item table on this node and none in the request")
    return np.asarray(ids, dtype=np.int64), dot_scores(U, V), (U, V)


def _original(ids: np.ndarray | None, index: np.ndarray) -> np.ndarray:
    """The dataset's original ids of compact ``index`` (the index itself when it has none)."""
    return index if ids is None else np.asarray(ids)[index]


def _plain(values: np.ndarray) -> np.ndarray:
    """Ids as an array ``numpy.load`` reads without pickle (object arrays become text)."""
    return values.astype(str) if values.dtype == object else values


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` through a temporary file (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def _write_files(
    folder: Path,
    ids: np.ndarray,
    items: np.ndarray,
    scores: np.ndarray,
    tables: tuple[torch.Tensor, torch.Tensor] | None,
    data: Interactions,
) -> int:
    """``recommendations.csv`` (and ``embeddings.npz`` when ``tables`` are given); users with a list."""
    folder.mkdir(parents=True, exist_ok=True)
    users = 0

    def write_csv(path: Path) -> None:
        nonlocal users
        with path.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["user", "rank", "item", "score"])
            user_ids = _original(data.user_ids, ids)
            for row in range(len(ids)):
                ranked = np.flatnonzero(items[row] >= 0)
                users += bool(len(ranked))
                names = _original(data.item_ids, items[row, ranked])
                for rank, (item, score) in enumerate(zip(names, scores[row, ranked], strict=True), 1):
                    out.writerow([user_ids[row], rank, item, repr(float(score))])

    _replace(folder / "recommendations.csv", write_csv)
    if tables is not None:
        U, V = tables
        arrays: dict[str, Any] = {
            "user_ids": _plain(_original(data.user_ids, ids)),
            "users": U.detach().numpy(),
            "item_ids": _plain(_original(data.item_ids, np.arange(data.n_items))),
            "items": torch.as_tensor(V).detach().numpy(),
        }

        def write_npz(path: Path) -> None:
            with path.open("wb") as f:
                np.savez(f, **arrays)

        _replace(folder / "embeddings.npz", write_npz)
    return users


def write_node_output(
    protocol: str,
    program: ClientProgram[Any],
    request: Message,
    data: Interactions,
    output: NodeOutput | None,
    record: Mapping[str, Any],
) -> Message:
    """Write this node's users' recommendations (and embeddings, if asked); reply with counts only.

    Args:
        protocol: the run's protocol.
        program: the node's client program, its state restored (after the prediction stages).
        request: the server's request (at most the final item table, as for evaluation).
        data: the run's dataset as the node loaded it (original ids, train and validation items).
        output: the node operator's choice (``None``: write nothing).
        record: what ``node.json`` states about the session (step, evaluation rounds).

    Returns:
        A reply with the fields ``written`` (0 or 1), ``users`` (users with a list) and ``k`` only
        (and ``failed = 1`` when the node could not write its folder: the node logs why).
    """
    _request_items(protocol, program, request)
    if output is None:
        return Message(fields={"written": 0, "users": 0, "k": 0})
    ids, score_rows, tables = _scores(program, request)
    seen = sp.csr_matrix(data.train, dtype=np.float32)
    if data.valid is not None:
        seen = seen + sp.csr_matrix(data.valid, dtype=np.float32)
    seen = sp.csr_matrix(seen[ids])
    items, scores = top_k(score_rows, np.arange(len(ids), dtype=np.int64), output.k, data.n_items, seen)
    if not output.embeddings:
        embeddings = "not asked"
    elif tables is None:
        embeddings = "not written: this model does not score by a dot product of embeddings"
    else:
        embeddings = "embeddings.npz"
    manifest = {
        "protocol": protocol,
        "clients": len(ids),
        "k": output.k,
        "seen": "train + valid" if data.valid is not None else "train",
        "model": "last",
        "ids": "original" if data.user_ids is not None else "identity",
        **{str(k): v for k, v in record.items()},
        "recommendations": "recommendations.csv",
        "embeddings": embeddings,
    }
    folder = output.out_dir / f"node-{output.name or 'local'}"
    try:
        users = _write_files(folder, ids, items, scores, tables if output.embeddings else None, data)
        manifest["users_with_recommendations"] = users
        _replace(folder / "node.json", lambda p: p.write_text(json.dumps(manifest, indent=1) + "\n"))
    except OSError as exc:  # the operator's folder: say so here; the server's run still completes
        _LOG.error("%s: could not write this node's recommendations to %s: %s", protocol, folder, exc)
        return Message(fields={"written": 0, "users": 0, "k": output.k, "failed": 1})
    return Message(fields={"written": 1, "users": users, "k": output.k})
