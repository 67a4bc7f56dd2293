"""The viewer's HTML: served (scripts from /static/, data from the JSON API) or one static file.

The page's own script and style ship in ``limen_jax/view/static/``; the charts are
plotly.js as shipped inside the ``plotly`` Python package (``plotly/package_data/
plotly.min.js``), read from disk, never downloaded. The static file inlines all three and
the run's data; the data sits in a ``<script type="application/json">`` block with every
``<``, ``>`` and ``&`` written as a JSON escape, so no program text can close the block.
Scripts run under a Content-Security-Policy: served, only the server's own scripts; static,
only the inlined scripts whose SHA-256 the policy names.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from limen_jax.view.data import to_json

STATIC = Path(__file__).with_name("static")


class MissingPlotly(RuntimeError):
    pass


def plotly_js_path() -> Path:
    """plotly.min.js inside the installed ``plotly`` package (found without importing it)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPlotly("the run viewer draws with plotly, which is not installed: pip install 'limen_jax[view]'")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path
    raise MissingPlotly("the installed plotly package has no package_data/plotly.min.js: reinstall plotly")


def asset(name: str) -> bytes:
    """A file the page loads: ``plotly.min.js``, ``app.js`` or ``style.css``; KeyError otherwise."""
    if name == "plotly.min.js":
        return plotly_js_path().read_bytes()
    if name in ("app.js", "style.css"):
        return (STATIC / name).read_bytes()
    raise KeyError(name)


def _template() -> str:
    return (STATIC / "index.html").read_text(encoding="utf-8")


def _fill(title: str, csp: str, head: str, body: str) -> str:
    out = _template()
    for key, value in (("{{CSP}}", csp), ("{{TITLE}}", _html_escape(title)), ("{{HEAD}}", head), ("{{BODY}}", body)):
        out = out.replace(key, value)
    return out


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def served_html(title: str) -> str:
    csp = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
           "connect-src 'self'; font-src 'self' data:")
    # app.js first: it asks for the run's data while the browser parses plotly.js
    body = '<script src="static/app.js"></script>\n<script src="static/plotly.min.js"></script>'
    return _fill(title, csp, '<link rel="stylesheet" href="static/style.css">', body)


def embed_json(data: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' survive unescaped."""
    text = to_json(data)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def static_html(title: str, data: Any) -> str:
    """One self-contained page: style, plotly.js, the data and the viewer script inlined."""
    plotly = asset("plotly.min.js").decode("utf-8")
    app = asset("app.js").decode("utf-8")
    style = asset("style.css").decode("utf-8")
    if "</script" in plotly.lower() or "</script" in app.lower():  # would end the element early
        raise RuntimeError("a bundled script contains '</script'; cannot inline it")
    csp = (f"default-src 'none'; script-src {_sha256(plotly)} {_sha256(app)}; style-src 'unsafe-inline'; "
           "img-src data: blob:; font-src data:")
    body = (f'<script id="limen-data" type="application/json">{embed_json(data)}</script>\n'
            f"<script>{app}</script>\n<script>{plotly}</script>")
    return _fill(title, csp, f"<style>\n{style}\n</style>", body)
