"""Jinja templates for every rendered artifact (shipped as provision._templates)."""
