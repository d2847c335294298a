"""Role and phase names of LP-GCN, shared by code, ledger and logs (spec ``lpgcn.md`` §1.3)."""

SERVER = "server"
CLIENT = "client"
CONV_CLIENT = "conv-client"
KEY_HOLDER = "key-client"  # u_c of Algorithm 2, who draws the shared key S

__all__ = ["CLIENT", "CONV_CLIENT", "KEY_HOLDER", "SERVER"]
