"""Secrets as the inventory writes them, below the inventory: `armor` and `recipients`
(what the ciphertext alone shows), `fields` (the inventory's field types), `check`, and
the `vault` of decrypted values that never print. Decrypting and delivering them is
`provision.secrets`, above the inventory (docs/architecture.md#floors)."""
