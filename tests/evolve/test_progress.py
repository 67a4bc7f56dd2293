"""The live status: what a run is doing, on a terminal (a rich status line) and off one
(a plain line per phase), with the training estimate from the last batch's throughput."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

from limen_jax.progress import Progress

HERE = Path(__file__).parent
TOY = ["--task", "toy_corridor", "--iterations", "1", "--candidates", "2", "--seeds", "2",
       "--full-steps", "2048", "--mutator", "offline"]


def test_the_training_estimate_is_the_last_batchs_throughput():
    p = Progress(stream=io.StringIO())
    assert p.training_text(0, 4, 2, 150_000, 0.0) == "iter 0: training 4 candidate(s) x 2 seed(s)"
    p.trained(4, 2, 100_000, 10.0)  # 800k steps in 10 s
    assert p.rate == 80_000
    head = "iter 3: training 4 candidate(s) x 2 seed(s)"
    assert p.training_text(3, 4, 2, 150_000, 0.0) == f"{head}, ~15 s expected (80k steps/s)"
    assert p.training_text(3, 4, 2, 150_000, 12.4) == f"{head}, 12 s of ~15 s (80k steps/s)"


def test_off_a_terminal_each_phase_is_one_plain_line():
    out = io.StringIO()
    p = Progress(stream=out)
    p.set("ask", "iter 0: asking for 2 answer(s)")
    p.set("ask", "iter 0: 1/2 answered, checking", announce=False)
    p.set("train", lambda: "iter 0: training")
    p.clear("train")
    assert out.getvalue() == "  iter 0: asking for 2 answer(s)\n  iter 0: training\n"
    quiet = io.StringIO()
    Progress(enabled=False, stream=quiet).set("ask", "x")
    assert quiet.getvalue() == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_close_ends_the_ticker_at_once_not_at_its_next_second():
    screen = Terminal()
    p = Progress(stream=screen)
    p.set("train", lambda: "iter 0: training")
    tickers = [t for t in threading.enumerate() if t.name == "limen-progress"]
    assert len(tickers) == 1 and tickers[0].is_alive()
    start = time.perf_counter()
    p.close()
    took = time.perf_counter() - start
    assert took < 0.25 and not tickers[0].is_alive()  # the ticker waits 1 s between redraws
    assert "iter 0: training" in screen.getvalue()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            "LIMEN_JAX_XLA_CACHE": "off", "COLUMNS": "200"}


def test_a_piped_run_prints_its_phases_before_each_report(tmp_path):
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", *TOY, "--run-dir", str(tmp_path / "run")],
                         capture_output=True, text=True, env=_env(), timeout=600).stdout
    lines = out.splitlines()
    assert lines[0] == f"limen_jax: starting toy_corridor in {tmp_path / 'run'}"  # within seconds
    assert lines[1].startswith("limen_jax: toy_corridor, mode full")
    for it in (0, 1):
        report = next(i for i, line in enumerate(lines) if line.startswith(f"[iter {it}/1]"))
        asked = lines.index(f"  iter {it}: asking for 2 answer(s)")
        head = f"  iter {it}: training 2 candidate(s) x 2 seed(s)"
        trained = next(i for i, line in enumerate(lines) if line.startswith(head))
        assert asked < trained < report
    # the second batch's line carries the first batch's throughput as an estimate
    assert " steps/s)" in next(line for line in lines if line.startswith("  iter 1: training"))
    assert "\r" not in out and "\x1b" not in out  # nothing redrawn in a log


def test_on_a_terminal_a_status_line_shows_the_phase(tmp_path):
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "limen_jax.evolve", *TOY, "--run-dir", str(tmp_path / "run")],
                            stdout=follower, stderr=follower, env=_env())
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=600) == 0
    os.close(leader)
    screen = b"".join(chunks).decode(errors="replace")
    assert "iter 0: training 2 candidate(s) x 2 seed(s)" in screen
    assert "\x1b[" in screen  # drawn and redrawn by rich, not printed as lines
    assert "  iter 0: asking for 2 answer(s)\r\n" not in screen  # no plain phase lines on a terminal
    assert "[iter 1/1]" in screen and "best:" in screen


def test_the_ask_status_counts_answers_and_checks_with_an_estimate(monkeypatch):
    from limen_jax import progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    status = progress.AskStatus(3, asks=4, expected=4)
    assert status.text() == "iter 3: asking for 4 answer(s)"
    clock[0] = 105.0
    status.answered = 2
    status.checked(0, 1)
    status.checked(0, 2)
    assert status.text() == "iter 3: 2/4 answered, checked 0/4, 5 s"
    clock[0] = 109.0
    status.checked(1, 2)  # one check ended 4 s after the first began: ~4 s each for the other three
    assert status.text() == "iter 3: 2/4 answered, checked 1/4, 9 s (checks ~12 s left)"
    status.answered, clock[0] = 4, 113.0
    status.checked(4, 4)
    assert status.text() == "iter 3: 4/4 answered, checked 4/4, 13 s"
