r"""LP-GCN as separate party programs: client shards on nodes, the relay server, rounds between them.

:class:`~fedgraphrec.protocols.lpgcn.protocol.LPGCN` runs every party in one process on whole
tables. Here the same algorithm (spec ``lpgcn.md`` Algorithms 1–6 and 9, LightGCN backbone) is cut
along party lines for an engine that runs parties in different processes (Flower, see
``fedgraphrec.engines.flower.lpgcn``):

* :class:`ShardClient` is the client-side program for a *shard* of users hosted by one node: their
  user rows and Adam state, their real and virtual items and weights :math:`c_{ui}`, the
  convolution-items assigned to them (rows, Adam state, verified real holders) and the shared key
  :math:`S`. Its persistent state is a ``dict`` of NumPy arrays (the engine stores it between
  messages); every request is one :meth:`ShardClient.handle` call.
* :class:`RelayServer` is the server role: it routes :math:`S`-encrypted user rows to
  convolution-clients, synchronises item rows to holders, keeps the token graph, assigns
  convolution-items (Algorithm 3) and feeds the minibatches' triples. It never holds :math:`S`,
  a user embedding or a user gradient in the clear.
* A :class:`Transport` carries one *round*: a request to each node and its reply. All of a node's
  users are batched in one message per round.

Rounds. Set-up takes five (``keys``: key pairs and virtual items; ``wrap``: the key-client draws
:math:`S` and wraps it for every public key; ``tokens``: users unwrap :math:`S` and upload item
tokens and :math:`S`-encrypted degrees; ``verify``: assignment and verification answers sealed to
the asking convolution-client; ``init``: convolution-clients learn their real neighbours and publish
layer-0 rows). A minibatch then takes :math:`2L+2` rounds, the least this dependency chain allows
(every arrow crosses nodes): ``forward`` :math:`k=1..L` (a node receives layer-:math:`(k-1)` rows of
the items its users hold and ciphertexts of the neighbours of its convolution-items, and returns
layer :math:`k` of both), ``loss`` (layer-:math:`L` item rows and the negatives' rows of every
layer in; loss parts and :math:`S`-encrypted direct item gradients out), ``aggregate``
(convolution-items' direct gradients in; :math:`G^{(L)}` out), ``backward`` :math:`k=L-1..0`
(:math:`G^{(k+1)}` in, :math:`G^{(k)}` out; at :math:`k=0` every owner runs Adam on all its rows,
as PyTorch's dense Adam does, and publishes the new layer-0 rows for the next minibatch).
Prediction is :math:`L` forward rounds, the last of which returns the final embeddings.

Deliberate differences from the in-process engine (none changes a number beyond summation order):

* Virtual items are drawn per user from the stream ``("lpgcn", "virtual", u)`` (the in-process
  engine draws all users from one stream), and the upload order from ``("lpgcn", "upload-order",
  u)``, so a node needs nothing but its own users. The token graph, hence the assignment and the
  routing, differ from the in-process run's; the arithmetic does not depend on them.
* A node is trusted with all the users it hosts: rows of users on the same node are used locally,
  not routed through the server; ciphertexts the node needs are sent once per node.
* Every item must be held (really or virtually) by some client: the server cannot own an item it
  has no token for. :meth:`RelayServer.setup` raises a clear error otherwise.
* The triples are fed by the caller (the server replays the in-process sampler, spec §11.7: for
  equivalence runs both systems see the same triples), so the server knows them; negatives are
  still requested by token.
* LP-GCN has no dropout recovery: a node that does not answer stops the run
  (:class:`LostNodeError`).
"""

from fedgraphrec.protocols.lpgcn.distributed.relay import LocalTransport, Prediction, RelayServer
from fedgraphrec.protocols.lpgcn.distributed.shard import (
    LostNodeError,
    Msg,
    ShardClient,
    ShardSettings,
    ShardSource,
    Transport,
    rounds_per_minibatch,
)

__all__ = [
    "LocalTransport",
    "LostNodeError",
    "Msg",
    "Prediction",
    "RelayServer",
    "ShardClient",
    "ShardSettings",
    "ShardSource",
    "Transport",
    "rounds_per_minibatch",
]
