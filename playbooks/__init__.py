"""Playbooks shipped with provision (as provision._playbooks)."""
