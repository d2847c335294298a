"""Cryptographic building blocks, as thin wrappers over the pyca ``cryptography`` package.

* :class:`ClientKeyPair` / :class:`PublicKey` — per-client X25519 key pairs (:mod:`.agreement`).
* :class:`SharedKey` — the shared symmetric key ``S``, with purpose-bound sub-keys.
* :func:`wrap_key` / :func:`unwrap_key` — deliver ``S`` to a client (``PB_u(S)``).
* :func:`seal` / :func:`open_sealed` — one-shot public-key encryption (verification answers;
  :mod:`.ecies`, with the key wrapping).
* :class:`ItemTokenizer` — deterministic item-ID tokens under ``S``.
* :class:`PayloadCipher` — randomized AEAD of payloads under ``S``; :func:`ciphertext_size` and
  :func:`sealed_size` give exact output sizes for byte accounting.
* secure aggregation with dropout recovery (Bonawitz et al.): the client's and the server's state
  machines and the wire format in the package :mod:`.secagg` (import from its modules), over Shamir
  sharing (:mod:`~fedgraphrec.crypto.shamir`).
* :class:`FixedPoint` (:mod:`.fixed_point`) — reals as elements of the ring ``Z_{2^64}``
  (:mod:`.ring`); :func:`split` / :func:`reconstruct` / :func:`mask_from_seed` — additive sharing
  and masks over it (:mod:`.sharing`).
* :class:`IntegrityError` — a received message was tampered, replayed, re-routed or is missing;
  :class:`DecryptionError` (an :class:`IntegrityError`) — failed authentication.
"""
