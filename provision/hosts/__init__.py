"""The shell that talks to hosts: gather facts, converge, commit-confirmed (I/O, decides nothing)."""

