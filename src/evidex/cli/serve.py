"""``evidex serve``: run the HTTP service with uvicorn."""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Annotated

import typer

from evidex.cli._app import app, err_console
from evidex.cli._io import open_db
from evidex.cli._options import DbOpt
from evidex.errors import MissingExtraError, UsageError
from evidex.preflight import MAX_PASSAGES, MAX_TEXT_CHARS, InputLimits

logger = logging.getLogger("evidex.serve")


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Interface to bind; 0.0.0.0 exposes it to the network.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8321,
    db: DbOpt = None,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Serve every caller without a key. Only for a trusted network: anyone who can "
            "reach the port can read raw judge output and resolve review items.",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host header to answer (repeatable; default: this machine's names and the "
            "bound address; EVIDEX_ALLOWED_HOSTS, comma-separated).",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="A browser origin whose pages may call the API (repeatable; default none).",
        ),
    ] = None,
    max_body_mb: Annotated[
        float | None,
        typer.Option(
            "--max-body-mb",
            metavar="MB",
            min=0.001,
            help="The largest request body in megabytes; a larger one gets 413 before it is read "
            "(default 4; EVIDEX_MAX_BODY_MB).",
        ),
    ] = None,
    max_passages: Annotated[
        int,
        typer.Option(
            "--max-passages", metavar="N", min=1, help="Passages one request may carry (422 over)."
        ),
    ] = MAX_PASSAGES,
    max_text_chars: Annotated[
        int,
        typer.Option(
            "--max-text-chars",
            metavar="N",
            min=1,
            help="Characters one text (query, passage, answer, input) may have (422 over).",
        ),
    ] = MAX_TEXT_CHARS,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp",
            help="Also serve the jobs and the review queue as MCP tools for agents, over "
            "streamable HTTP at /mcp, with the same keys and roles (needs the 'mcp' extra).",
        ),
    ] = False,
) -> None:
    """Serve the jobs over HTTP: POST /tier (and the other jobs), the review queue and its web UI
    at /ui/, /log, /keys, /metrics and /healthz; with --mcp, the same jobs as MCP tools at /mcp.

    Callers send an API key (`evidex keys create`) as 'Authorization: Bearer KEY'. Until the
    store has a key, only this machine is served; on any other address the server refuses to
    start without one (or --no-auth).

    Every request is bounded: its body (413 before it is read), its passages and the length of
    each text (422 naming the field)."""
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError("evidex serve", "service") from exc
    if mcp and importlib.util.find_spec("mcp") is None:
        raise MissingExtraError("evidex serve --mcp", "mcp")
    from evidex.service import create_app
    from evidex.service.app import allowed_hosts_for
    from evidex.service.auth import is_loopback

    with open_db(db) as store:
        has_keys = store.has_keys()
        url = store.url
    if not no_auth and not has_keys and not is_loopback(host):
        raise UsageError(
            f"refusing to serve on {host} with no API key in the store: make one with "
            "`evidex keys create --role client` (or pass --no-auth on a trusted network)"
        )
    if no_auth:
        for line in (
            "AUTHENTICATION IS OFF (--no-auth): every caller is served as admin.",
            "Anyone who can reach this port can read raw judge output and resolve reviews.",
        ):
            logger.warning(line)
            err_console.print(f"[bold red]warning:[/] {line}", highlight=False)
    env_hosts = [h.strip() for h in os.environ.get("EVIDEX_ALLOWED_HOSTS", "").split(",")]
    env_hosts = [h for h in env_hosts if h]
    hosts = allowed_hosts_for(host, list(allowed_host or []) or env_hosts)
    application = create_app(
        url,
        auth="off" if no_auth else "auto",
        allowed_hosts=hosts,
        cors_origins=list(cors_origin or []),
        max_body_bytes=int(max_body_mb * 1024 * 1024) if max_body_mb else None,
        limits=InputLimits(max_passages=max_passages, max_text_chars=max_text_chars),
    )
    if mcp:
        from evidex.service.mcp import mount_mcp

        mount_mcp(application)
    uvicorn.run(application, host=host, port=port, log_level="info")
