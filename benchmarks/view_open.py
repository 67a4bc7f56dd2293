"""How fast the run viewer opens a 300-candidate run (docs/howto/look-at-a-run.md): absolute
seconds, with no baseline.

Synthesizes a run directory of N candidates of realistic size (tests/view/view_runs.py:
3 KB programs, 8 KB prompts, ten 36-point curves, crossovers, rejections, 3 islands), then
times, each the median of ``--repeat`` tries:

- ``load+summary``: data.load and data.summary in this process (what /api/run costs);
- ``server up``: ``python -m limen_jax.view RUN --port P`` from process start until it answers;
- ``lineage shown``: headless Chromium from navigation until the lineage graph is drawn and
  takes clicks (the page's own ``limen:interactive`` mark);
- ``page ready``: from navigation until every chart is drawn;
- ``click``: from a click on a lineage dot until that program's code and curves are shown;
- ``static write``, ``static shown``, ``static ready``: ``--static`` (the file's size too), and
  opening the file, as above.

    python benchmarks/view_open.py --n 300
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "view"))

from view_runs import large_run  # noqa: E402

from limen_jax.view import data  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

PROFILE = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_up(root: Path) -> tuple[float, subprocess.Popen[bytes], str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "limen_jax.view", str(root), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            urllib.request.urlopen(url + "api/stamp", timeout=1).read()
            return time.perf_counter() - t, proc, url
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("the viewer exited") from None
            time.sleep(0.02)


def _open(browser, url: str, click: str | None) -> tuple[float, float, float | None]:
    pg = browser.new_page(viewport={"width": 1500, "height": 1100})
    t = time.perf_counter()
    pg.goto(url)
    pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
    ready = time.perf_counter() - t
    # from navigation start (the browser's clock) to the lineage graph drawn and clickable
    shown = pg.evaluate("() => performance.getEntriesByName('limen:interactive')[0].startTime") / 1000
    if PROFILE:
        print(pg.evaluate("""() => ['measure', 'navigation', 'resource']
            .flatMap((kind) => performance.getEntriesByType(kind))
            .map((e) => `${e.name.split('/').pop()}: from ${e.startTime.toFixed(0)} ms, ${e.duration.toFixed(0)} ms`)
            .join('\\n')"""))
    clicked = None
    if click:
        box = pg.evaluate("""(id) => {
            const gd = document.getElementById('lineage');
            const groups = [...gd.querySelectorAll('.scatterlayer .trace')];
            for (let t = 0; t < gd.data.length; t++) {
                const i = (gd.data[t].customdata || []).indexOf(id);
                if (i < 0) continue;
                const g = groups.find((q) => q.__data__ && q.__data__[0].trace.index === t);
                const r = g.querySelectorAll('.point')[i].getBoundingClientRect();
                return {x: r.x + r.width / 2, y: r.y + r.height / 2};
            }
        }""", click)
        pg.mouse.move(box["x"], box["y"])
        t = time.perf_counter()
        pg.mouse.click(box["x"], box["y"])
        pg.wait_for_function("(id) => document.getElementById('detail').dataset.id === id "
                             "&& document.querySelectorAll('#curves .curve .js-line').length > 0", arg=click)
        clicked = time.perf_counter() - t
    pg.close()
    return shown, ready, clicked


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="print the page's own timings")
    _record.add_argument(ap)
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.profile
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        root = large_run(Path(tmp) / "run", n=args.n)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        run = data.load(root)
        child = next(r["id"] for r in reversed(list(run.records.values())) if r["parent_ids"] and r["curves"])
        print(f"{args.n} candidates, run dir {size / 1e6:.1f} MB")
        t: dict[str, list[float]] = {k: [] for k in ("load+summary", "server up", "lineage shown", "page ready",
                                                      "click", "static write", "static shown", "static ready")}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            for _ in range(args.repeat):
                s = time.perf_counter()
                data.summary(data.load(root))
                t["load+summary"].append(time.perf_counter() - s)
                up, proc, url = _server_up(root)
                t["server up"].append(up)
                try:
                    shown, ready, clicked = _open(browser, url, child)
                finally:
                    proc.terminate()
                    proc.wait()
                t["lineage shown"].append(shown)
                t["page ready"].append(ready)
                t["click"].append(clicked or 0.0)
                out = Path(tmp) / "run.html"
                s = time.perf_counter()
                subprocess.run([sys.executable, "-m", "limen_jax.view", str(root), "--static", str(out)], check=True,
                               stdout=subprocess.DEVNULL)
                t["static write"].append(time.perf_counter() - s)
                shown, ready, _ = _open(browser, out.as_uri(), None)
                t["static shown"].append(shown)
                t["static ready"].append(ready)
            browser.close()
        print(f"static file {out.stat().st_size / 1e6:.1f} MB")
        for k, v in t.items():
            print(f"{k:>13}: {statistics.median(v):.2f} s  (runs: {', '.join(f'{x:.2f}' for x in v)})")
        figures: dict[str, Any] = {f"{k}, median (s)": statistics.median(v) for k, v in t.items()}
        figures.update({"candidates": args.n, "run dir (MB)": round(size / 1e6, 1),
                        "static file (MB)": round(out.stat().st_size / 1e6, 1)})  # fmt: skip
    _record.write(__file__, figures, args)


if __name__ == "__main__":
    main()
