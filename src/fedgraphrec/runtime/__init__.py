"""The runtime every protocol runs on: transport, ledger, transcripts, codecs.

Names are imported on first use, so a process that needs only a light part of the runtime (a Flower
SuperNode's ``ClientApp``, started once per message, which must not pay for importing torch) stays
light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedgraphrec.runtime.codec import (
        CodecError,
        decode_tensor,
        encode_tensor,
        encoded_size,
        tensor_header,
    )
    from fedgraphrec.runtime.ledger import Ledger, LedgerRow
    from fedgraphrec.runtime.network import CryptoMode, Network
    from fedgraphrec.runtime.transcript import Received, Transcript

_HOME = {
    "CodecError": "codec",
    "decode_tensor": "codec",
    "encode_tensor": "codec",
    "encoded_size": "codec",
    "tensor_header": "codec",
    "Ledger": "ledger",
    "LedgerRow": "ledger",
    "CryptoMode": "network",
    "Network": "network",
    "Received": "transcript",
    "Transcript": "transcript",
}

__all__ = [
    "CodecError",
    "CryptoMode",
    "Ledger",
    "LedgerRow",
    "Network",
    "Received",
    "Transcript",
    "decode_tensor",
    "encode_tensor",
    "encoded_size",
    "tensor_header",
]


def __getattr__(name: str) -> Any:
    """Import ``name`` from its module on first use."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"fedgraphrec.runtime.{_HOME[name]}"), name)
    globals()[name] = value
    return value
