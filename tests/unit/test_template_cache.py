"""Compiled templates are cached beside the package's bytecode only in a directory that is
ours alone, are compiled again when their text changes, and a cache that cannot be written
changes nothing but the time."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

from provision.render import template_cache


def env_over(sources: dict[str, str], **options: bool) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FunctionLoader(sources.get), **options)  # type: ignore[arg-type]


def test_a_cached_template_renders_the_same_and_a_changed_one_is_compiled_again(tmp_path: Path) -> None:
    sources = {"t.j2": "hello {{ who }}\n"}
    first = env_over(sources)
    template_cache.attach(first, tmp_path)
    assert first.get_template("t.j2").render(who="a") == "hello a"
    cached = list(tmp_path.iterdir())
    assert len(cached) == 1 and cached[0].name.startswith("jinja2-")

    second = env_over(sources)  # a new process: no in-memory templates
    template_cache.attach(second, tmp_path)
    assert second.get_template("t.j2").render(who="b") == "hello b"

    sources["t.j2"] = "bye {{ who }}\n"  # a new version of the template, same name
    third = env_over(sources)
    template_cache.attach(third, tmp_path)
    assert third.get_template("t.j2").render(who="c") == "bye c"


def test_other_options_use_other_files(tmp_path: Path) -> None:
    sources = {"t.j2": "{% if x %}\n  yes\n{% endif %}\n"}
    plain, trimmed = env_over(sources), env_over(sources, trim_blocks=True, lstrip_blocks=True)
    assert template_cache.options_key(plain) != template_cache.options_key(trimmed)
    for env in (plain, trimmed):
        template_cache.attach(env, tmp_path)
    assert plain.get_template("t.j2").render(x=True) == "\n  yes\n"
    assert trimmed.get_template("t.j2").render(x=True) == "  yes\n"
    assert len(list(tmp_path.iterdir())) == 2


def test_a_directory_others_may_write_to_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    for bad in (shared, link, tmp_path / "missing", tmp_path / "file"):
        if bad.name == "file":
            bad.write_text("")
        env = env_over({"t.j2": "x"})
        template_cache.attach(env, bad)
        assert env.bytecode_cache is None, bad
        assert env.get_template("t.j2").render() == "x"
    assert list(shared.iterdir()) == []
    own = tmp_path / "own"
    own.mkdir(mode=0o755)
    assert template_cache.usable(own)


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    env = env_over({"t.j2": "still {{ 1 + 1 }}"})
    template_cache.attach(env, gone)
    assert env.bytecode_cache is not None
    os.rmdir(gone)  # the write will fail (as on a read-only install)
    assert env.get_template("t.j2").render() == "still 2"
