"""A demonstrations file is untrusted: crafted ones are refused from the members' headers
before any array is inflated (a header claiming 4 TiB, a zip bomb), or from their values
(wrong dtypes, actions outside the action space), or never unpickled; one line naming
the file, exit 2 from the CLI, and no run directory."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest
from toy_task import ToyCorridor

from limen_jax import demos


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """A valid toy_corridor set's arrays (8 episodes of random play, half tagged expert)."""
    task = ToyCorridor()
    ep = demos.from_episodes(demos.rollout(task, demos.random_policy(task), jax.random.key(0), 8), "random")
    tagged = demos.DemoSet(ep.transitions, np.where(ep.episode < 4, "expert", "random"), ep.round, ep.episode,
                           ep.step)
    path = tagged.save(tmp_path_factory.mktemp("good") / "good.npz")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def header_only(shape: tuple[int, ...], dtype: str) -> bytes:
    """A .npy header claiming ``shape`` with no data after it."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue()


def write_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, raw in members.items():
            zf.writestr(f"{name}.npy", raw)
    return path


def refused(path: Path, *says: str) -> str:
    with pytest.raises(ValueError) as err:
        demos.load_demos(path, ToyCorridor())
    line = str(err.value)
    assert line.startswith(f"{path}: ") and "\n" not in line, line
    for part in says:
        assert part in line, line
    return line


def bounded(fn: object) -> tuple[float, int]:
    """(seconds, peak bytes traced) of calling ``fn`` (numpy's allocations are traced)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        fn()  # type: ignore[operator]
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return seconds, peak


def test_a_header_claiming_4_tib_is_refused_from_the_header(tmp_path: Path, good: dict[str, np.ndarray]) -> None:
    members = {k: npy_bytes(v) for k, v in good.items()}
    members["sim/0"] = header_only((2**40,), "<f4")  # 4 TiB of float32
    path = write_zip(tmp_path / "lying.npz", members)
    seconds, peak = bounded(lambda: refused(path, "member sim/0.npy is", "uncompressed but its header describes"))
    assert seconds < 1.0 and peak < 20 * 2**20


def test_a_set_larger_than_the_bound_is_refused_before_reading(tmp_path: Path, good: dict[str, np.ndarray]) -> None:
    path = write_zip(tmp_path / "ok.npz", {k: npy_bytes(v) for k, v in good.items()})
    total = sum(v.nbytes for k, v in good.items() if k not in ("round", "episode", "step")) + 3 * good["step"].nbytes
    with pytest.raises(ValueError) as err:
        demos.load_demos(path, ToyCorridor(), max_bytes=total - 1)
    assert "more than the" in str(err.value) and "GiB a demonstration set may" in str(err.value)
    assert len(demos.load_demos(path, ToyCorridor(), max_bytes=total)) == len(good["source"])


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path, good: dict[str, np.ndarray]) -> None:
    """A member whose header is the right one but whose data inflates to 256 MB."""
    members = {k: npy_bytes(v) for k, v in good.items()}
    members["action"] = members["action"] + bytes(256 * 2**20)
    path = write_zip(tmp_path / "bomb.npz", members)
    assert path.stat().st_size < 2 * 2**20
    seconds, peak = bounded(lambda: refused(path, "member action.npy is", "a damaged or crafted file"))
    assert seconds < 1.0 and peak < 20 * 2**20


def test_wrong_dtypes_are_refused(tmp_path: Path, good: dict[str, np.ndarray]) -> None:
    for key, value, says in (
        ("action", good["action"].astype(np.float32), "array action has dtype float32, task 'toy_corridor' needs "
                                                       "int32 (integers)"),
        ("sim/0", good["sim/0"].astype(np.complex64), "array sim/0 has dtype complex64"),
        ("source", np.zeros(len(good["source"]), np.int32), "array source has dtype int32, needs strings"),
        ("step", good["step"].astype(np.float64), "array step has dtype float64"),
        ("step", good["step"][:-1], "array step has shape"),
    ):
        path = write_zip(tmp_path / f"{key.replace('/', '_')}.npz",
                         {k: npy_bytes(value if k == key else v) for k, v in good.items()})
        refused(path, says)
    # another integer type stands for the task's int32, when its values fit
    wide = write_zip(tmp_path / "wide.npz", {k: npy_bytes(v.astype(np.int64) if k == "action" else v)
                                             for k, v in good.items()})
    assert demos.load_demos(wide, ToyCorridor()).transitions.action.dtype == np.int32
    big = good["action"].astype(np.int64)
    big[0] = 2**40
    path = write_zip(tmp_path / "big.npz", {k: npy_bytes(big if k == "action" else v) for k, v in good.items()})
    refused(path, "array action holds 1099511627776, outside the task's int32 range")


def test_actions_outside_the_action_space_are_refused(tmp_path: Path, good: dict[str, np.ndarray]) -> None:
    n = ToyCorridor().action_space.n
    for bad in (n, -1):
        action = good["action"].copy()
        action[3] = bad
        path = write_zip(tmp_path / f"act{bad}.npz", {k: npy_bytes(action if k == "action" else v)
                                                      for k, v in good.items()})
        refused(path, "1 actions are outside the task's action space", f"at transition 3: {bad}")


def test_a_pickle_is_never_loaded(tmp_path: Path, good: dict[str, np.ndarray]) -> None:
    source = np.array(list(good["source"]), dtype=object)
    path = write_zip(tmp_path / "pickle.npz", {k: npy_bytes(source if k == "source" else v)
                                               for k, v in good.items()})
    refused(path, "array source holds Python objects (a pickle), which are never read")


def test_the_cli_refuses_a_crafted_file_in_one_line_before_the_run_dir(tmp_path: Path,
                                                                       good: dict[str, np.ndarray]) -> None:
    members = {k: npy_bytes(v) for k, v in good.items()}
    members["sim/0"] = header_only((2**40,), "<f4")
    path = write_zip(tmp_path / "lying.npz", members)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "limen_jax.evolve", "--task", "toy_corridor", "--strategy",
                          "grace", "--mutator", "offline", "--demos", str(path), "--run-dir", str(run)],
                         capture_output=True, text=True, cwd=Path(__file__).parent, env=env, timeout=600)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: member sim/0.npy is"), out.stderr
    assert not run.exists()


@pytest.mark.parametrize(("patch", "says"), [
    (lambda b, local, central: (b.__setitem__(local + 6, b[local + 6] | 1),
                                b.__setitem__(central + 8, b[central + 8] | 1)),
     "is encrypted"),  # the zip's "encrypted" flag: zipfile asks for a password
    (lambda b, local, central: (b.__setitem__(slice(local + 8, local + 10), b"\x09\x00"),
                                b.__setitem__(slice(central + 8 + 2, central + 12), b"\x09\x00")),
     "compression method is not supported"),  # Deflate64, which zipfile cannot inflate
])
def test_a_member_zipfile_cannot_open_is_one_line(tmp_path: Path, good: dict[str, np.ndarray], patch: object,
                                                  says: str) -> None:
    path = write_zip(tmp_path / "set.npz", {k: npy_bytes(v) for k, v in good.items()})
    raw = bytearray(path.read_bytes())
    local, central = raw.find(b"PK\x03\x04"), raw.find(b"PK\x01\x02")
    patch(raw, local, central)  # type: ignore[operator]
    path.write_bytes(bytes(raw))
    refused(path, "cannot be read", says)
