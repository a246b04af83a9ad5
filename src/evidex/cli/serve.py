"""``evidex serve``: run the HTTP service with uvicorn."""

from __future__ import annotations

import typer

from evidex.cli._app import app
from evidex.errors import MissingExtraError


@app.command()
def serve(
    host: str = typer.Option(
        "127.0.0.1", help="Interface to bind; 0.0.0.0 exposes it to the network."
    ),
    port: int = typer.Option(8321, help="TCP port."),
    db: str = typer.Option(
        None, "--db", help="Store URL (default: EVIDEX_DB or the user data dir)."
    ),
) -> None:
    """Serve the jobs over HTTP: POST /tier (and the other jobs), /review, /log, /metrics and
    /healthz."""
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError("evidex serve", "service") from exc
    from evidex.service import create_app

    uvicorn.run(create_app(db), host=host, port=port, log_level="info")
