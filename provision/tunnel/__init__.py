"""One-command tunnels: the pure plan (`plan`, `forwards`), the session that supervises a
backend (`session`), and the backends (`openssh`, `paramiko_backend`)."""
