"""The migration journal's lock, held here and tried from a second Python process."""

from __future__ import annotations

from pathlib import Path


def test_the_lock_keeps_a_second_process_out_and_status_can_tell(tmp_path: Path) -> None:
    import subprocess
    import sys

    from provision.dns.migrate.store import JournalStore
    from provision.errors import OperationError

    store = JournalStore(tmp_path / "m")
    assert not store.busy("api.example.org.")
    with store.lock("api.example.org."):
        code = ("import sys; from pathlib import Path; from provision.dns.migrate.store import "
                f"JournalStore; s = JournalStore(Path({str(tmp_path / 'm')!r})); "
                "print(s.busy('api.example.org.'))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "True"
        probe = ("from pathlib import Path; from provision.dns.migrate.store import JournalStore\n"
                 f"s = JournalStore(Path({str(tmp_path / 'm')!r}))\n"
                 "try:\n    s.lock('api.example.org.').__enter__()\nexcept Exception as e:\n"
                 "    print(type(e).__name__, e)")
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert out.stdout.startswith(OperationError.__name__) and "another provision process" in out.stdout
    assert not store.busy("api.example.org.")
