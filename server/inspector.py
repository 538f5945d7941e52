"""The memory inspector: one page at `/inspect` that reads the API with the caller's key.

The page is static (`inspector.html`: plain HTML and JavaScript, no build step) and
holds no data: every thread, message, index state and recall it shows comes from
the `/v1` endpoints, behind the same API keys. Its Content-Security-Policy lets it
reach this server only, so no request leaves the machine (docs/inspector.md).
"""

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

PAGE = files("recallstack.server").joinpath("inspector.html")
POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'unsafe-inline'",
        "style-src 'unsafe-inline'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
"""What the page may load and reach: its own inline code, and this server."""


def add_inspector(app: FastAPI) -> None:
    """Serve the inspector page at `/inspect` (not part of the API's schema)."""
    html = PAGE.read_text(encoding="utf-8")
    headers = {
        "Content-Security-Policy": POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }

    @app.get("/inspect", include_in_schema=False)
    async def inspect() -> HTMLResponse:
        return HTMLResponse(html, headers=headers)
