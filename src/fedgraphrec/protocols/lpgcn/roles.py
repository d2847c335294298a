"""Role and phase names of LP-GCN, shared by code, ledger and logs (spec ``lpgcn.md`` §1.3)."""

from fedgraphrec.protocols.common import CLIENT, KEY_HOLDER, SERVER

CONV_CLIENT = "conv-client"

__all__ = ["CLIENT", "CONV_CLIENT", "KEY_HOLDER", "SERVER"]
