"""Differential-privacy mechanisms and accountants.

Sits beside :mod:`fedgraphrec.crypto`: it may import ``data``, ``models`` and ``evaluation``, and is
imported by ``runtime`` and ``protocols``. Each mechanism lives in its own module with the accounting
that goes with it, so a protocol imports exactly the guarantee it claims.
"""
