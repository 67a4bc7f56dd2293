"""The run viewer: ``python -m limen_jax.view RUN_DIR [--port N] [--static OUT.html] [--tensorboard DIR]``.

``data`` reads a run directory into plain dicts (through ``read``, which treats the directory
as untrusted input), ``server`` serves them (stdlib http.server, 127.0.0.1, its own Host and
origin only), ``page`` builds the HTML (served, or one self-contained file), ``tensorboard``
writes the curves as event files. See docs/howto/look-at-a-run.md.
"""

from limen_jax.view.data import RunDirError, bundle, detail, load, summary

__all__ = ["RunDirError", "bundle", "detail", "load", "summary"]
