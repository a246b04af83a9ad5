"""A PostgreSQL server of its own in a temp dir, for the tests and benchmarks that need one
(Debian's server binaries; as root, run as the ``postgres`` user, since initdb refuses root)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN_DIRS = [
    Path("/usr/local/bin"),
    *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True),
]


def binary(name: str) -> str | None:
    for d in BIN_DIRS:
        if (d / name).exists():
            return str(d / name)
    return shutil.which(name)


def missing() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if not binary("initdb") or not binary("pg_ctl"):
        return "PostgreSQL server binaries (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to drop to the postgres user"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def temp_postgres(*settings: str) -> Iterator[str]:
    """A fresh server on a free loopback port until the block ends; yields the URL of its
    ``postgres`` database. ``settings``: server settings (``max_connections=300``)."""
    reason = missing()
    if reason is not None:
        raise RuntimeError(reason)
    initdb, pg_ctl = str(binary("initdb")), str(binary("pg_ctl"))
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="evidex-pg-"))
    if as_user:
        shutil.chown(root, "postgres")
    data, port = root / "data", _free_port()
    options = " ".join(
        [f"-p {port} -k {root} -c listen_addresses=127.0.0.1", *(f"-c {s}" for s in settings)]
    )
    subprocess.run(
        [*as_user, initdb, "-D", str(data), "-U", "evidex", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [*as_user, pg_ctl, "-D", str(data), "-w", "-l", str(root / "log"), "-o", options, "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://evidex@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)
