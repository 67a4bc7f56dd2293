"""``python -m limen_jax.view RUN_DIR``: serve the run viewer, or write it to one file.

Bad input (not a run directory, a half-written or older one, a missing optional package, a
port in use) is one line on stderr and exit status 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from limen_jax.cli_errors import report_bugs
from limen_jax.rundir import write_text_atomic
from limen_jax.view import data


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m limen_jax.view", description=__doc__.splitlines()[0].replace("``", ""))
    p.add_argument("run_dir", help="a run directory written by limen_jax.evolve")
    p.add_argument("--port", type=int, default=8765, help="port to serve on (0: any free one; default 8765)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--static", metavar="OUT.html", help="write one self-contained HTML file instead of serving")
    p.add_argument("--tensorboard", metavar="DIR", help="write the run's curves as TensorBoard event files to DIR")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    return p


def _fail(message: str) -> int:
    print(f"limen_jax.view: {message}", file=sys.stderr)
    return 2


def _write_static(run: data.Run, out: Path) -> None:
    from limen_jax.view import page

    html = page.static_html(f"limen_jax: {run.path.resolve().name}", data.bundle(run))
    write_text_atomic(out, html)


@report_bugs
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        run = data.load(args.run_dir)
    except data.RunDirError as exc:
        return _fail(str(exc))
    for note in run.notes:
        print(f"note: {note}", file=sys.stderr)
    outputs = [Path(p) for p in (args.static, args.tensorboard) if p]
    for out in outputs:
        if not out.parent.is_dir():
            return _fail(f"{out}: folder {out.parent} does not exist")
    if args.static and Path(args.static).is_dir():
        return _fail(f"{args.static} is a folder; --static wants a file name")
    try:
        from limen_jax.view import page

        page.plotly_js_path()
        if args.tensorboard:
            from limen_jax.view import tensorboard

            tensorboard._writer_class()
    except RuntimeError as exc:  # a missing optional package
        return _fail(str(exc))
    if args.static:
        _write_static(run, Path(args.static))
        print(f"wrote {args.static} ({Path(args.static).stat().st_size / 1e6:.1f} MB, {len(run.records)} programs)")
    if args.tensorboard:
        from limen_jax.view import tensorboard

        n = tensorboard.write(run, args.tensorboard)
        print(f"wrote {n} points to {args.tensorboard} (tensorboard --logdir {args.tensorboard})")
    if outputs:
        return 0
    return _serve(args)


def _serve(args: argparse.Namespace) -> int:
    from limen_jax.view.server import make_server

    try:
        server = make_server(args.run_dir, args.host, args.port)
    except data.RunDirError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    host, port = server.server_address[:2]
    url = f"http://{host!s}:{port}/"
    try:  # from the first line on, Ctrl-C is a clean stop
        print(f"limen_jax view of {args.run_dir}: {url}  (Ctrl-C to stop)", flush=True)
        if args.open:
            webbrowser.open(url)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
