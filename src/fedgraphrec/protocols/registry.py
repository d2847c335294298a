"""The one list of protocols: name → :class:`ProtocolEntry` (settings class, kind, programs).

Everything that lists or configures protocols reads :data:`REGISTRY`: the run configuration
(``[protocol]`` table, ``--set``), ``fedgraphrec train PROTOCOL`` and its ``--help``, the audit CLI,
the docs' settings tables and ``reproduce``. Adding a protocol is one entry here.

Protocols from outside the package (a test's toy protocol) are registered in every process that
imports this module by ``FEDGRAPHREC_PROTOCOLS="name=module:attribute,..."`` (each attribute a
:class:`ProtocolEntry`, imported on first use), so the SuperNodes and ServerApp of a deployment know
them too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Literal

from fedgraphrec.protocols import fedgrec, gnn4fr, lpgcn
from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.baselines import fedmf, fedncf, fedpergnn, pgcn
from fedgraphrec.protocols.baselines.fedmf.settings import FedMFSettings
from fedgraphrec.protocols.baselines.fedncf.settings import FedNCFSettings
from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.protocols.baselines.pgcn.settings import PGCNSettings
from fedgraphrec.protocols.central import CentralSettings
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.fedgrec.settings import FCFSettings, FedeRankSettings, FedGRecSettings
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.protocols.settings import ProtocolSettings

__all__ = ["REGISTRY", "ProtocolEntry", "lookup", "protocol_names", "resolve_refs"]

Kind = Literal["ranking", "rating"]


@dataclass(frozen=True)
class ProtocolEntry:
    """One registered protocol.

    Attributes:
        name: the protocol's name (``fedgraphrec train NAME``, ``[protocol] name = ...``).
        settings: its frozen settings dataclass (every hyper-parameter, with its default).
        kind: ``ranking`` (top-K metrics, e.g. ``recall@20``) or ``rating`` (``rmse``/``mae``).
        summary: one line for listings and help.
        programs: its party programs (``None``: trained by the loop's own learner, e.g. ``central``).
    """

    name: str
    settings: type[ProtocolSettings]
    kind: Kind
    summary: str
    programs: ProtocolSpec | None = None


_ENTRIES = (
    ProtocolEntry("central", CentralSettings, "ranking", "the oracle: LightGCN(+), MF, NGCF, NCF, Mult-VAE"),
    ProtocolEntry("lpgcn", LPGCNSettings, "ranking", "LP-GCN: lossless LightGCN(+)", lpgcn.SPEC),
    ProtocolEntry("gnn4fr", GNN4FRSettings, "ranking", "GNN4FR: lossless LightGCN", gnn4fr.SPEC),
    ProtocolEntry("fedgrec", FedGRecSettings, "ranking", "FedGRec-K: latent embeddings", fedgrec.SPEC),
    ProtocolEntry("federank", FedeRankSettings, "ranking", "FedeRank: FedGRec, K = 0", fedgrec.FEDERANK),
    ProtocolEntry("fcf", FCFSettings, "ranking", "FCF: K = 0, squared error", fedgrec.FCF),
    ProtocolEntry("fedmf", FedMFSettings, "ranking", "FedMF: lossless BPR-MF", fedmf.SPEC),
    ProtocolEntry("fedncf", FedNCFSettings, "ranking", "FedNCF: federated NeuMF", fedncf.SPEC),
    ProtocolEntry("pgcn", PGCNSettings, "ranking", "P-GCN: LightGCN+, secure sums", pgcn.SPEC),
    ProtocolEntry("fedpergnn", FedPerGNNSettings, "ranking", "FedPerGNN: LDP", fedpergnn.SPEC),
    ProtocolEntry("p4gcn", P4GCNSettings, "rating", "P4GCN: two organisations, HE + DP; rating baselines"),
    ProtocolEntry("dgrec", DGRECSettings, "ranking", "DGREC: serverless gossip, one-bit LDP (peers)"),
)  # fmt: skip
REGISTRY: dict[str, ProtocolEntry] = {e.name: e for e in _ENTRIES}
"""Every protocol by name (tests may add a toy protocol for their duration)."""

_EXTERNAL: dict[str, str] = {
    name.strip(): ref.strip()
    for name, _, ref in (
        item.partition("=") for item in os.environ.get("FEDGRAPHREC_PROTOCOLS", "").split(",")
    )
    if ref.strip()
}


def resolve_refs(refs: Mapping[str, str]) -> dict[str, ProtocolEntry]:
    """``{name: "module:attribute"}`` → the :class:`ProtocolEntry` each reference names."""
    out: dict[str, ProtocolEntry] = {}
    for name, ref in refs.items():
        module, _, attr = ref.partition(":")
        entry = getattr(import_module(module), attr)
        if not isinstance(entry, ProtocolEntry):
            raise TypeError(f"{ref}: not a ProtocolEntry")
        out[name] = entry
    return out


def lookup(name: str, extra: Mapping[str, ProtocolEntry] | None = None) -> ProtocolEntry:
    """The protocol registered as ``name`` (also among ``extra`` and ``FEDGRAPHREC_PROTOCOLS``).

    Raises:
        KeyError: no such protocol; the message lists the registered ones.
    """
    if extra and name in extra:
        return extra[name]
    if name in REGISTRY:
        return REGISTRY[name]
    if name in _EXTERNAL:
        REGISTRY.update(resolve_refs({name: _EXTERNAL[name]}))
        return REGISTRY[name]
    raise KeyError(f"unknown protocol {name!r}; known: {', '.join(protocol_names())}")


def protocol_names() -> list[str]:
    """The registered protocols, in registry order."""
    return [*REGISTRY, *(n for n in _EXTERNAL if n not in REGISTRY)]
