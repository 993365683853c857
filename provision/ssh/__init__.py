"""SSH connections from the inventory: jump chains, the one host-key trust path, remote exec."""
