"""``python -m limen_jax.view``: bad input is one line on stderr, exit 2, nothing written;
--static writes one self-contained file; --tensorboard writes event files."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from view_runs import EVIL, evil_run, small_run


def view(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "limen_jax.view", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def _half_config(root: Path) -> None:
    text = (root / "config.json").read_text()
    (root / "config.json").write_text(text[: len(text) // 2])


def _half_state(root: Path) -> None:
    text = (root / "state.json").read_text()
    (root / "state.json").write_text(text[: len(text) // 2])


def _no_state(root: Path) -> None:
    (root / "state.json").unlink()


def _no_config(root: Path) -> None:
    (root / "config.json").unlink()


def _old_records(root: Path) -> None:
    state = json.loads((root / "state.json").read_text())
    for rec in state["archive"]["programs"]:
        del rec["stage"]
    (root / "state.json").write_text(json.dumps(state))


def _old_archive(root: Path) -> None:
    state = json.loads((root / "state.json").read_text())
    state["archive"]["version"] = 0
    (root / "state.json").write_text(json.dumps(state))


def _no_archive(root: Path) -> None:
    (root / "state.json").write_text(json.dumps({"iteration": 3, "programs": []}))


def _state_is_a_list(root: Path) -> None:
    (root / "state.json").write_text("[]")


def _junk_record(root: Path) -> None:
    state = json.loads((root / "state.json").read_text())
    state["archive"]["programs"][0]["island"] = "zero"
    (root / "state.json").write_text(json.dumps(state))


def _junk_grid(root: Path) -> None:
    state = json.loads((root / "state.json").read_text())
    state["archive"]["grid"] = {"spec": {"obs_edges": [5, 1]}, "ids": [], "fitness": []}
    (root / "state.json").write_text(json.dumps(state))


BAD = {
    "a record of the wrong types": (_junk_record, "has fields of the wrong type"),
    "a grid that cannot be read": (_junk_grid, "the archive's grid cannot be read"),
    "half-written config.json": (_half_config, "config.json is not valid JSON"),
    "half-written state.json": (_half_state, "state.json is not valid JSON"),
    "killed before its first checkpoint": (_no_state, "has no checkpoint (state.json) yet"),
    "config.json missing": (_no_config, "config.json is missing"),
    "records of an older format": (_old_records, "lacks stage: written by an older version"),
    "archive of an older format": (_old_archive, "archive format version 0; this viewer reads version 1"),
    "checkpoint without an archive": (_no_archive, "has no archive"),
    "state.json not an object": (_state_is_a_list, "must each hold a JSON object"),
}


def _check_refused(result: subprocess.CompletedProcess[str], expect: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("limen_jax.view: "), result.stderr
    assert expect in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_run_dirs_are_refused_in_one_line(tmp_path: Path, case: str) -> None:
    spoil, expect = BAD[case]
    root = small_run(tmp_path / "run")
    spoil(root)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    out = tmp_path / "out.html"
    _check_refused(view(root, "--static", out, "--tensorboard", tmp_path / "tb"), expect)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created


@pytest.mark.parametrize("spoil", [_half_state, _no_state], ids=["half-written", "missing"])
def test_a_kill_between_checkpoints_shows_the_previous_one(tmp_path: Path, spoil) -> None:
    # what a kill mid-checkpoint leaves (tests/evolve/test_kill_anywhere.py): state.json cut or
    # not yet renamed into place, state.json.prev whole; --resume falls back to it, so does the viewer
    root = small_run(tmp_path / "run")
    good = json.loads((root / "state.json").read_text())
    (root / "state.json.prev").write_text(json.dumps(good))
    spoil(root)
    out = tmp_path / "page.html"
    result = view(root, "--static", out)
    assert result.returncode == 0, result.stderr
    (note,) = result.stderr.strip().splitlines()
    assert note.startswith("note: ") and note.endswith("showing the previous checkpoint state.json.prev, "
                                                       "as --resume would use it")
    assert f"{len(good['archive']['programs'])} programs" in result.stdout


def test_empty_dir_missing_dir_and_a_file(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _check_refused(view(tmp_path / "empty", "--static", tmp_path / "o.html"), "is not a limen_jax run directory")
    _check_refused(view(tmp_path / "nowhere"), "no such directory")
    (tmp_path / "file.txt").write_text("hello")
    _check_refused(view(tmp_path / "file.txt"), "no such directory")
    assert not (tmp_path / "o.html").exists()


def test_output_into_a_missing_folder_is_refused(tmp_path: Path) -> None:
    root = small_run(tmp_path / "run")
    _check_refused(view(root, "--static", tmp_path / "no" / "o.html"), "does not exist")
    assert not (tmp_path / "no").exists()


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    root = small_run(tmp_path / "run")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        _check_refused(view(root, "--port", s.getsockname()[1]), "cannot listen on 127.0.0.1:")


def test_static_is_self_contained_and_escapes_untrusted_text(tmp_path: Path) -> None:
    root = evil_run(tmp_path / "run")
    out = tmp_path / "page.html"
    result = view(root, "--static", out)
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    # no network: every script inline, no src=/href= to anywhere
    assert not re.search(r"<script[^>]*\bsrc=", html) and not re.search(r"<link[^>]*\bhref=\"(?!data:)", html)
    # and the page may not fetch anything (plotly.js names a map server it never uses here)
    assert "default-src 'none'" in html and "connect-src" not in html
    # the untrusted text appears only escaped: the page's own three script elements (plotly, the
    # data block, the viewer) and no other tag than a page without that text has
    assert EVIL not in html
    assert html.count("</script>") == 3
    benign = tmp_path / "benign.html"
    assert view(small_run(tmp_path / "benign"), "--static", benign).returncode == 0
    tags = lambda text: sorted(re.findall(r"<(?:script|img|iframe|object|embed)\b", text))  # noqa: E731
    assert tags(html) == tags(benign.read_text())
    data = html.split('<script id="limen-data" type="application/json">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data
    assert json.loads(data)["details"]["it0000-c00"]["thought"] == EVIL


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Scalars of the TFRecord event files in ``folder`` (length, crc, Event proto, crc)."""
    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        raw = path.read_bytes()
        pos = 0
        while pos < len(raw):
            (n,) = struct.unpack("<Q", raw[pos: pos + 8])
            event = event_pb2.Event.FromString(raw[pos + 12: pos + 12 + n])
            pos += 12 + n + 4
            for v in event.summary.value:
                out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out


def test_tensorboard_writes_each_curve_and_the_search(tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX", reason="tensorboardX is the optional --tensorboard writer")
    root = small_run(tmp_path / "run")
    result = view(root, "--tensorboard", tmp_path / "tb")
    assert result.returncode == 0, result.stderr
    first = _scalars(tmp_path / "tb" / "it0000-c00")
    assert first == {"success": [(0, pytest.approx(0.1)), (1, 0.5)], "return": [(0, 1.0), (1, 2.0)],
                     "reward/approach": [(0, pytest.approx(0.2)), (1, pytest.approx(0.1))],
                     "reward/goal": [(0, 0.0), (1, 1.0)], "entropy": [(0, 1.0), (1, pytest.approx(0.9))]}
    search = _scalars(tmp_path / "tb" / "search")
    assert search["search/best_success"] == [(0, 0.5), (1, 0.75), (2, 0.75)]
    assert search["search/rejected"] == [(0, 1.0), (1, 0.0), (2, 0.0)]
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == [
        "it0000-c00", "it0001-c00", "it0001-c01", "search"]
