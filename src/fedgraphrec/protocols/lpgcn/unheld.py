"""The items nobody holds, as the key-client names them to every client (sealed under :math:`S`).

The server owns the rows of the items no client holds (§11.17), and a client sends the direct
gradient of such an item to the server in the clear. Which items those are is the server's word
at the loss stage (``neg_owner``), so a server that lied would get gradients of items a client
convolves — rows a user otherwise only sends sealed — in the clear. Every client therefore holds the
list itself: the key-client, which names the unheld items to the server at set-up, also seals the
list under :math:`S` for every client, and the server relays it with the verification stage.

* The list is authentic: sealed under :math:`S` (which the server never holds), bound to its phase,
  to the key-client as sender and to each receiving client, and every client's copy must be the
  same.
* It is complete: the key-client derives it from the held tokens the server reports, so a server
  that hid an item's holders would put a held item in it; every client refuses a list that names
  an item it holds (real or virtual). Every client gets the list, so every holder checks it.
* At the loss stage a client accepts "the server owns it" only for an item on the list.
"""

from __future__ import annotations

import numpy as np

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.common import CLIENT, KEY_HOLDER, SERVER
from fedgraphrec.protocols.lpgcn.holdings import TokenIndex
from fedgraphrec.runtime.endpoint import require_senders
from fedgraphrec.runtime.part import Part

__all__ = ["UNHELD_LIST", "read_unheld_list", "server_owned_check", "unheld_list_part"]

UNHELD_LIST = "setup/unheld-list"
"""Phase of the key-client's sealed list of the items nobody holds (a copy for each client)."""


def unheld_list_part(tokens: np.ndarray, key_client: int, n_clients: int) -> Part:
    """The key-client's list (tokens of the unheld items, ascending ids): a sealed copy for each client.

    Each copy is bound to its receiver, so a copy handed to another client is refused.
    """
    blob = np.ascontiguousarray(tokens, np.uint8).tobytes()
    return Part(
        UNHELD_LIST, "item_token", KEY_HOLDER, SERVER, [blob] * n_clients, shape="blobs", protection="sealed",
        senders=np.full(n_clients, key_client), seal_to_role=CLIENT, seal_to=np.arange(n_clients),
    )  # fmt: skip


def read_unheld_list(
    part: Part, clients: np.ndarray, key_client: int, item_tokens: np.ndarray, held: np.ndarray
) -> np.ndarray:
    """The unheld item ids the list names, after every check a client makes (module docstring).

    Args:
        part: the relayed list, opened: its copy for each client of the node.
        clients: the node's clients (sorted ids).
        key_client: the key-client's id (every node derives it from the public settings).
        item_tokens: every catalogue item's token, by item id.
        held: every item a client of this node holds (real or virtual).

    Raises:
        IntegrityError: a copy missing, from another sender or different from the others; a token
            of no catalogue item; an item of the list that a client of this node holds.
    """
    if part.receivers is None or not np.array_equal(part.receivers, clients):
        raise IntegrityError(f"{UNHELD_LIST}: every client of this node must receive the key-client's list")
    require_senders(part, np.full(len(clients), key_client), "the key-client's list of unheld items")
    copies = list(part.value)
    if any(bytes(c) != bytes(copies[0]) for c in copies[1:]):
        raise IntegrityError(f"{UNHELD_LIST}: the clients of this node got different lists")
    blob = bytes(copies[0]) if copies else b""
    if len(blob) % TOKEN_BYTES:
        raise IntegrityError(f"{UNHELD_LIST}: the list is not a whole number of item tokens")
    items = TokenIndex(item_tokens).find(np.frombuffer(blob, dtype=np.uint8).reshape(-1, TOKEN_BYTES))
    if (items < 0).any():
        raise IntegrityError(f"{UNHELD_LIST}: the list names a token of no catalogue item")
    if np.isin(items, held).any():
        raise IntegrityError(
            f"{UNHELD_LIST}: the list names an item a client of this node holds; the server hid its holders"
        )
    return np.unique(items)


def server_owned_check(
    owner: np.ndarray, items: np.ndarray, senders: np.ndarray, unheld: np.ndarray, n_clients: int
) -> None:
    """Refuse the owners the server named for negatives unless each is plausible (module docstring).

    ``owner``: the named convolution-client of each row (``-1``: the server); ``items``: the rows'
    items, none held by the row's ``senders``; ``unheld``: the key-client's list.

    Raises:
        IntegrityError: an owner outside ``[-1, n_clients)``, the row's own sender (a client convolves
            only items it holds), or the server for an item not on the list.
    """
    if len(owner) and (owner.min() < -1 or owner.max() >= n_clients):
        raise IntegrityError("loss/negative-embeddings: the server named an owner that is no client")
    if (owner == senders).any():
        raise IntegrityError(
            "loss/negative-embeddings: the server named a client owner of an item it does not hold"
        )
    mine = owner < 0
    if mine.any() and not np.isin(items[mine], unheld).all():
        raise IntegrityError(
            "loss/negative-embeddings: the server claimed an item some client holds; its gradient "
            "would have gone to the server in the clear"
        )
