"""The ClientApp of the ``deploy/flower`` app: every protocol's SuperNode side, in one ``ClientApp``.

* ``query.lpgcn`` — an LP-GCN shard's rounds (:mod:`fedgraphrec.engines.flower.lpgcn`);
* ``query.party`` — any protocol registered as party programs (:mod:`fedgraphrec.engines.flower.node`).

The handlers are imported on their first message only: a SuperNode starts a fresh ClientApp
process for every message.
"""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

__all__ = ["client_app"]

client_app = ClientApp()


@client_app.query("lpgcn")
def _lpgcn(msg: Message, context: Context) -> Message:
    """One LP-GCN round on this SuperNode's shard of users."""
    from fedgraphrec.engines.flower.lpgcn import lpgcn_query

    return lpgcn_query(msg, context)


@client_app.query("party")
def _party(msg: Message, context: Context) -> Message:
    """One round of a party-program protocol on this SuperNode's shard of clients."""
    from fedgraphrec.engines.flower.node import party_query

    return party_query(msg, context)
