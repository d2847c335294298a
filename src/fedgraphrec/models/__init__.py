"""Centralized reference models (the oracles every lossless protocol is tested against)."""
