"""The page at `/`: static files shipped in the package (`steadyloop/_web/page/`).

No build step and nothing from a CDN: the page is plain HTML, CSS and JavaScript
modules, served from this package, and its Content-Security-Policy lets it load and
connect to this origin only, so a model's answer that smuggles in markup could not
fetch a script from elsewhere even if the page ever rendered it (it does not: text goes
in with `textContent`). The page needs no token to load; its calls to the API do.

    GET /              the page (`?thread=ID` opens a thread; HEAD too)
    GET /page/{file}   its scripts and style sheet
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

__all__ = ["PAGE_DIR", "PAGE_POLICY", "install_page"]

PAGE_DIR = Path(str(resources.files("steadyloop._web") / "page"))
PAGE_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
_HEADERS = {
    "Content-Security-Policy": PAGE_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def install_page(app: FastAPI) -> None:
    """Serve the page at `/` and its files under `/page/` on `app`."""
    index = (PAGE_DIR / "index.html").read_text(encoding="utf-8")

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(index, headers=_HEADERS)

    app.mount("/page", StaticFiles(directory=PAGE_DIR), name="page")
