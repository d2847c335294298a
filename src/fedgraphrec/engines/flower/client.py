"""The ClientApp of the ``deploy/flower`` app: every protocol's SuperNode side, in one ``ClientApp``.

``query.party`` runs one stage of any protocol registered as party programs on this SuperNode's
shard of clients (:mod:`fedgraphrec.engines.flower.node`). The handler is imported on the first
message only: a SuperNode may start a fresh ClientApp process for every message.
"""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

__all__ = ["client_app"]

client_app = ClientApp()


@client_app.query("party")
def _party(msg: Message, context: Context) -> Message:
    """One round of a party-program protocol on this SuperNode's shard of clients."""
    records = msg.content.config_records
    if "header" in records and records["header"].get("protocol") == "p4gcn":  # organisations, not shards
        from fedgraphrec.engines.flower.p4gcn_node import p4gcn_query

        return p4gcn_query(msg, context)
    from fedgraphrec.engines.flower.node import party_query

    return party_query(msg, context)
