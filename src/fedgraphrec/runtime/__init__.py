"""The runtime every protocol runs on: transport, ledger, transcripts, codecs."""

from fedgraphrec.runtime.codec import CodecError, decode_tensor, encode_tensor, encoded_size, tensor_header
from fedgraphrec.runtime.ledger import Ledger, LedgerRow
from fedgraphrec.runtime.network import CryptoMode, Network
from fedgraphrec.runtime.rows import decode_rows, encode_rows, relay_rows
from fedgraphrec.runtime.transcript import Received, Transcript

__all__ = [
    "CodecError",
    "CryptoMode",
    "Ledger",
    "LedgerRow",
    "Network",
    "Received",
    "Transcript",
    "decode_rows",
    "decode_tensor",
    "encode_rows",
    "encode_tensor",
    "encoded_size",
    "relay_rows",
    "tensor_header",
]
