"""The viewer as a person uses it: a real run directory (a short offline evolve) in headless
Chromium (Debian's ``chromium``, driven by Playwright with the system binary; .ci/run
installs both). Click a program, see its code and its curves; the static file does the same
with no network; untrusted text stays text; a live run is followed."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from view_runs import EVIL, evil_run, small_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")

from limen_jax.view import data, page  # noqa: E402
from limen_jax.view.server import make_server  # noqa: E402

TOY = {"search": {"iterations": 2, "candidates": 2}, "cascade": {"full_steps": 8192}, "llm": {"mutator": "offline"}}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Iterations 0-2 of 2 candidates: iteration 2's children have parents."""
    import limen_jax as lj

    root = tmp_path_factory.mktemp("real") / "run"
    lj.evolve("xland_easy", TOY, run_dir=root, verbose=False)
    return root


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


class Served:
    def __init__(self, root: Path) -> None:
        self.server = make_server(root, port=0)
        host, port = self.server.server_address[:2]
        self.url = f"http://{host}:{port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def open_page(browser: Any, url: str) -> tuple[Any, list[str]]:
    pg = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    pg.goto(url)
    pg.wait_for_selector("body[data-ready='1']", timeout=30_000)
    return pg, errors


def click_node(pg: Any, program_id: str) -> None:
    """Click the lineage graph's dot of ``program_id`` where it is drawn, as a mouse would."""
    box = pg.evaluate("""(id) => {
        const gd = document.getElementById('lineage');
        const traces = [...gd.querySelectorAll('.scatterlayer .trace')];
        for (let t = 0; t < gd.data.length; t++) {
            const i = (gd.data[t].customdata || []).indexOf(id);
            if (i < 0) continue;
            // d3 binds each drawn trace group to its calcdata: find the group of trace t
            const group = traces.find((g) => g.__data__ && g.__data__[0].trace.index === t);
            const r = group.querySelectorAll('.point')[i].getBoundingClientRect();
            return {x: r.x + r.width / 2, y: r.y + r.height / 2};
        }
        return null;
    }""", program_id)
    assert box is not None, f"no dot for {program_id}"
    pg.mouse.move(box["x"], box["y"])
    pg.mouse.click(box["x"], box["y"])
    pg.wait_for_function("(id) => document.getElementById('detail').dataset.id === id", arg=program_id,
                         timeout=10_000)


def check_program_shown(pg: Any, run: data.Run, program_id: str) -> None:
    record = run.records[program_id]
    assert pg.locator("#detail-title").text_content() == program_id
    assert pg.locator("#detail pre.code").text_content() == record["code"]
    keys = data.curve_keys(record["curves"])
    assert keys and pg.locator("#curves .curve").count() == len(keys)
    # the success curve is drawn: a line path through as many points as the curve has
    n = len(record["curves"]["success"])
    xs = pg.evaluate("() => document.querySelector('#curves .curve[data-key=\"success\"]').data[0].x.length")
    assert xs == n
    path = pg.locator('#curves .curve[data-key="success"] .scatterlayer path.js-line').first.get_attribute("d")
    assert path and path.count("L") >= n - 2
    diff = pg.locator("#detail pre.diff")
    assert diff.count() == len(record["parent_ids"])
    if record["parent_ids"]:
        assert diff.first.text_content().startswith(f"--- {record['parent_ids'][0]}")


def test_real_run_click_a_child_see_code_and_curves(browser: Any, real_run: Path,
                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    run = data.load(real_run)
    child = next(r for r in run.records.values() if r["parent_ids"] and r["curves"])
    with Served(real_run) as s:
        pg, errors = open_page(browser, s.url)
        assert int(pg.evaluate("document.body.dataset.programs")) == len(run.records)
        click_node(pg, child["id"])
        check_program_shown(pg, run, child["id"])
        # the grid's slider goes back to iteration 0, where only the first generation holds cells
        pg.eval_on_selector("#grid-slider", "(el) => { el.value = '0'; el.dispatchEvent(new Event('input')); }")
        assert pg.locator("#grid-iter").text_content() == "0"
        cells = pg.evaluate("""() => document.getElementById('grid-chart').data
            .flatMap((t) => t.customdata.flat()).filter((id) => id).length""")
        assert 0 < cells <= sum(r["iteration"] == 0 for r in run.records.values())
        shot = tmp_path_factory.mktemp("shots") / "viewer.png"
        pg.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        if os.environ.get("LIMEN_VIEW_SHOT"):  # docs/view.png is made this way
            shutil.copy(shot, os.environ["LIMEN_VIEW_SHOT"])
        assert errors == []


def test_static_file_opens_offline(browser: Any, real_run: Path, tmp_path: Path) -> None:
    run = data.load(real_run)
    out = tmp_path / "run.html"
    out.write_text(page.static_html("run", data.bundle(run)))
    pg = browser.new_page(viewport={"width": 1500, "height": 1100})
    requests: list[str] = []
    pg.on("request", lambda r: requests.append(r.url))
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(out.as_uri())
    pg.wait_for_selector("body[data-ready='1']", timeout=30_000)
    child = next(r for r in run.records.values() if r["parent_ids"] and r["curves"])
    click_node(pg, child["id"])
    check_program_shown(pg, run, child["id"])
    assert [u for u in requests if not u.startswith("file://")] == []
    assert errors == []


@pytest.mark.parametrize("mode", ["served", "static"])
def test_untrusted_text_shows_as_text(browser: Any, tmp_path: Path, mode: str) -> None:
    root = evil_run(tmp_path / "run")
    if mode == "static":
        out = tmp_path / "evil.html"
        out.write_text(page.static_html("evil", data.bundle(data.load(root))))
        pg, errors = open_page(browser, out.as_uri() + "#it0000-c00")
        _check_evil(pg)
    else:
        with Served(root) as s:
            pg, errors = open_page(browser, s.url + "#it0000-c00")
            _check_evil(pg)
    assert [e for e in errors if "__pwned" in e] == []


def _check_evil(pg: Any) -> None:
    pg.wait_for_function("() => document.getElementById('detail').dataset.id === 'it0000-c00'")
    pg.eval_on_selector_all("details", "(ds) => ds.forEach((d) => d.open = true)")
    for node in ("it0000-c01", "it0000-c00"):  # the rejected one shows its error text too
        pg.evaluate("(id) => { location.hash = ''; }", node)
        click_node(pg, node)
        pg.eval_on_selector_all("details", "(ds) => ds.forEach((d) => d.open = true)")
        pg.wait_for_timeout(200)
        assert pg.evaluate("() => window.__pwned") is None
        assert pg.locator("#detail img, #texts img, #strategy img, #log img, #lineage img").count() == 0
        assert EVIL in pg.locator("#detail pre.code").text_content()
    assert EVIL in pg.locator("#detail pre.thought").text_content()
    assert EVIL in pg.locator("#detail pre.reply").text_content()
    assert EVIL in pg.locator("#detail pre.prompt").text_content()
    assert EVIL in pg.locator("#texts").text_content() and EVIL in pg.locator("#strategy").text_content()
    assert EVIL in pg.locator("#log").text_content()
    # the operator and the curve name pass through Plotly's labels, escaped: no tag, the text as text
    pg.select_option("#colour-by", "operator")
    assert EVIL in pg.locator("#lineage .legend").text_content()
    assert pg.locator("#curves .curve").nth(1).locator(".gtitle").text_content() == f"reward term: {EVIL}"
    assert pg.evaluate("() => window.__pwned") is None


def test_live_run_is_followed(browser: Any, tmp_path: Path) -> None:
    root = small_run(tmp_path / "run")
    with Served(root) as s:
        pg, errors = open_page(browser, s.url)
        assert pg.evaluate("document.body.dataset.programs") == "6"
        assert pg.locator("#run-status").text_content() == "live: following the run"
        state = json.loads((root / "state.json").read_text())
        rec = dict(state["archive"]["programs"][0], id="it0003-c01", iteration=3, island=1, success=0.9,
                   parent_ids=["it0001-c01"])
        state["archive"]["programs"].append(rec)
        state["iteration"] = 3
        (root / "state.json").write_text(json.dumps(state))
        pg.wait_for_selector("body[data-programs='7']", timeout=15_000)
        click_node(pg, "it0003-c01")
        assert pg.locator("#detail-title").text_content() == "it0003-c01"
        assert errors == []


def test_a_kept_policy_rolls_out_from_the_page(browser: Any, real_run: Path) -> None:
    """The run kept the best policy of each batch (--keep-policies best): its node's panel
    has a button that rolls it out on the server and shows success, each term and the
    episode's frames (xland renders); a program without a kept policy has no button."""
    run = data.load(real_run)
    kept = sorted(p.name for p in (real_run / "policies").iterdir())
    assert kept and all(pid in run.records for pid in kept)
    other = next(pid for pid in run.records if pid not in kept)
    with Served(real_run) as s:
        pg, errors = open_page(browser, s.url)
        click_node(pg, other)
        assert pg.locator("#detail .rollout-button").count() == 0
        click_node(pg, kept[-1])
        # the roll-out comes first; the checkpoint's files are folded away
        policy_box = pg.locator("#detail details", has_text="Kept policy").first
        assert "seed(s) kept" in policy_box.text_content()
        assert pg.evaluate("() => [...document.querySelectorAll('#detail details')].filter("
                           "d => d.firstChild.textContent.startsWith('checkpoint files')).map(d => d.open)") == [False]
        pg.locator("#detail .rollout-button").click()
        frames = pg.locator("#detail img.rollout-frames")
        frames.wait_for(timeout=180_000)
        assert pg.evaluate("() => document.querySelector('#detail img.rollout-frames').naturalWidth") > 0
        shown = pg.locator("#detail .rollout").text_content()
        assert "success" in shown and "seconds" in shown and "no frames" not in shown
        assert errors == []
