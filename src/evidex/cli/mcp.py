"""``evidex mcp``: the jobs and the review queue as MCP tools over stdin and stdout.

The SDK and the service load when the command runs, never when the CLI starts."""

from __future__ import annotations

import importlib.util

from evidex.cli._app import app
from evidex.cli._io import open_db
from evidex.cli._options import DbOpt
from evidex.errors import MissingExtraError
from evidex.jobs import run_sync


@app.command("mcp")
def mcp_command(db: DbOpt = None) -> None:
    """Serve the jobs and the review queue as MCP tools over stdin and stdout, for an agent
    that starts this command (Claude Desktop, an IDE, any MCP client).

    One tool per job, taking what POST /JOB takes and answering what it answers, and
    review_list and review_show over the review queue. Each job runs on its configured judge
    (the config file, or EVIDEX_JUDGE_TIER and the like); a call may name another one that
    EVIDEX_SERVICE_JUDGES enables. For agents on other machines, serve the same tools over HTTP
    with keys: `evidex serve --mcp`."""
    if importlib.util.find_spec("mcp") is None:
        raise MissingExtraError("evidex mcp", "mcp")
    from evidex.service import create_app
    from evidex.service.mcp import serve_stdio

    with open_db(db) as store:
        # the service's own judges, limits and prompts: a tool call here runs as POST /JOB does
        service = create_app(store, auth="off")
        run_sync(serve_stdio(service.state.jobs))
