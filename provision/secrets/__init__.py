"""Secrets in the inventory: age ciphertexts to the team's SSH keys (docs/secrets.md).

`armor` and `recipients` read what the text alone shows (pure); `age` runs the `age`
binary on the operator's machine; `vault` holds decrypted values for one plan or apply;
`delivery` lays them out on a host (pure); `edit` writes them back into the inventory.
"""
