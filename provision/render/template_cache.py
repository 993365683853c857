"""Compiled templates kept beside the package's own bytecode (I/O).

Jinja compiles a template (lex, parse, generate Python, compile it) the first time a
process renders it: ~10 ms a template, ~70 ms of every `plan` of a host, on its way to the
probe. Its `FileSystemBytecodeCache` keeps the result; here it is kept where Python keeps
the package's own `.pyc` files, the templates package's `__pycache__`, and it is written
only as Python writes those: when that directory exists, is ours (or root's) and nobody
else may write to it. Its files are code, so they have exactly the trust of the package's
own bytecode. A template whose text, Jinja version or Python changed is compiled again (the
cache checks a checksum of the source and Jinja's magic); the environment's own options
are part of each file's name. A cache that cannot be written is no error: the template is
compiled as without one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

import jinja2
from jinja2.bccache import Bucket


class PackageCache(jinja2.FileSystemBytecodeCache):
    """Jinja's file cache in a directory checked as above, whose writes may fail."""

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):  # read-only install, full disk: compiled next time
            super().dump_bytecode(bucket)


def usable(directory: Path) -> bool:
    """A directory that only we (or root) can write to, not a symlink."""
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid in (0, os.geteuid())
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def options_key(env: jinja2.Environment) -> str:
    """What, besides a template's text, changes the code Jinja compiles from it."""
    relevant = (env.block_start_string, env.block_end_string, env.variable_start_string,
                env.variable_end_string, env.comment_start_string, env.comment_end_string,
                env.line_statement_prefix, env.line_comment_prefix, env.trim_blocks,
                env.lstrip_blocks, env.newline_sequence, env.keep_trailing_newline,
                env.optimized, env.autoescape, sorted(env.extensions))
    return hashlib.sha256(repr(relevant).encode()).hexdigest()[:16]


def attach(env: jinja2.Environment, directory: Path) -> None:
    """Give `env` the cache in `directory`, when it is usable."""
    if usable(directory):
        env.bytecode_cache = PackageCache(str(directory), f"jinja2-{options_key(env)}-%s.cache")
