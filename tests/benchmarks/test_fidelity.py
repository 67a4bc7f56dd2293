"""benchmarks/fidelity.py: bad input exits 2 with one line before anything trains, and
the ``--reference`` hook drives a checkout through the reference's API (a stand-in with
the signatures of Lossfunk/LIMEN's limen.config, limen.adapters and limen.interface)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fidelity.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_fidelity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A stand-in for the reference's API as benchmarks/fidelity.py calls it: run_training
# reports success = seed / 100 and remembers the steps it was asked for.
STAND_IN = {
    "limen/__init__.py": "",
    "limen/train.py": "",
    "limen/config.py": '''
import dataclasses, json
@dataclasses.dataclass
class Training:
    seed: int = 42
    total_timesteps_full: int = 1000000
@dataclasses.dataclass
class Env:
    adapter_type: str = "xminigrid"
@dataclasses.dataclass
class Iface:
    max_obs_dim: int = 512
@dataclasses.dataclass
class Config:
    training: Training
    environment: Env
    interface: Iface
    @classmethod
    def from_yaml(cls, path):
        assert open(path).read().startswith("training")  # relative to the checkout: cwd is its root
        return cls(Training(), Env(), Iface())
''',
    "limen/adapters/__init__.py": '''
class Adapter:
    def __init__(self, config):
        self.config = config
    def get_dummy_state(self):
        return "state"
    def get_dummy_action(self):
        return 0
    def run_training(self, config, interface, obs_dim, total_timesteps=None):
        assert obs_dim == 7 and interface.path.endswith("easy_pickup.py")
        if (total_timesteps, config.training.seed > 42) in ((13, True), (14, False), (14, True)):
            import time  # a trainer that hangs: from its second seed on (13 steps) or at once (14)
            time.sleep(600)
        if total_timesteps == 666:
            raise MemoryError("out of memory on seed %d" % config.training.seed)
        return {"success_rate": config.training.seed / 100, "training_time": float(total_timesteps) / 1e6}
def get_adapter(adapter_type, config):
    assert adapter_type == "xminigrid"
    return Adapter(config)
''',
    "limen/interface.py": '''
class MDPInterface:
    def __init__(self, path):
        self.path = path
    @classmethod
    def from_file(cls, path):
        return cls(path)
    def validate(self, dummy_state, max_obs_dim=512, dummy_action=None):
        assert (dummy_state, max_obs_dim, dummy_action) == ("state", 512, 0)
        return 7
''',
    "configs/easy_pickup.yaml": "training: {}\n",
}


def _stand_in(root: Path) -> Path:
    for rel, text in STAND_IN.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_reference_hook_trains_each_seed_with_the_references_numbering(tmp_path):
    bench = load_script()
    ref = _stand_in(tmp_path / "LIMEN")
    program = tmp_path / "programs" / "easy_pickup.py"
    program.parent.mkdir()
    program.write_text("def get_observation(state): ...\n")
    full = bench.run_reference("xland_easy", program, 2, None, ref, sys.executable)
    assert full["success"] == [0.42, 0.43] and full["steps"] == 1_000_000
    reduced = bench.run_reference("xland_easy", program, 1, 131_072, ref, sys.executable)
    assert reduced["success"] == [0.42] and reduced["steps"] == 131_072
    assert not full["timed_out"] and not reduced["timed_out"]


def test_a_hung_reference_is_stopped_at_its_timeout_keeping_the_seeds_it_finished(tmp_path):
    bench = load_script()
    ref = _stand_in(tmp_path / "LIMEN")
    program = tmp_path / "easy_pickup.py"
    program.write_text("")
    start = time.monotonic()
    cut = bench.run_reference("xland_easy", program, 3, 13, ref, sys.executable, timeout_s=4)
    assert 4 <= time.monotonic() - start < 30
    assert cut["success"] == [0.42] and cut["steps"] == 13 and cut["timed_out"]
    with pytest.raises(RuntimeError, match=r"^the reference's trainer finished no seed of xland_easy in 2 s$"):
        bench.run_reference("xland_easy", program, 1, 14, ref, sys.executable, timeout_s=2)
    with pytest.raises(RuntimeError, match=r"^the reference's trainer failed on xland_easy: MemoryError: out of "
                                           r"memory on seed 42$"):  # fmt: skip
        bench.run_reference("xland_easy", program, 2, 666, ref, sys.executable)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tasks", "xland_easy,nope"], "fidelity: --tasks: unknown ['nope']; expected some of xland_easy, "),
        (["--seeds", "0"], "fidelity: --seeds must be at least 1, got 0"),
        (["--steps", "-5"], "fidelity: --steps must be at least 1, got -5"),
        (["--programs", "/nonexistent"], "fidelity: --programs /nonexistent: missing easy_pickup.py, "),
        (["--reference", "/nonexistent"], "fidelity: --reference needs --programs"),
        (["--reference-timeout", "0"], "fidelity: --reference-timeout must be a positive number of seconds, got 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bench = load_script()
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_reference_must_be_a_checkout(tmp_path, capsys):
    bench = load_script()
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "easy_pickup.py").write_text("")
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--programs", str(programs), "--reference", str(tmp_path)])
    assert capsys.readouterr().err == (
        f"fidelity: --reference {tmp_path}: not a Lossfunk/LIMEN checkout (configs/easy_pickup.yaml)\n"
    )


def test_table_sets_ours_beside_the_paper_and_marks_reduced_budgets(monkeypatch, capsys):
    bench = load_script()
    calls = []

    def fake_ours(task, program, seeds, steps):
        calls.append((task, program.name, seeds, steps))
        trained = steps // 131_072 * 131_072
        return {"success": [0.5, 1.0][:seeds], "steps": trained, "wall_s": 12.0, "compile_s": 3.0}

    monkeypatch.setattr(bench, "run_ours", fake_ours)
    assert bench.main(["--quick"]) == 0
    assert bench.main(["--tasks", "xland_medium", "--seeds", "2"]) == 0
    assert calls == [("xland_easy", "xland_easy.py", 1, 131_072), ("xland_medium", "xland_medium.py", 2, 2_000_000)]
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("xland_easy      0.99   0.50  0.50                        131,072    12.0 s"
                        "  (reduced: the paper trains 1,000,000)")  # fmt: skip
    assert lines[4] == "xland_medium    0.99   0.75  0.50, 1.00                1,966,080    12.0 s"
    assert '"paper": 0.99' in lines[5] and '"steps": 1966080' in lines[5]


def test_table_sets_the_reference_beside_ours_and_marks_a_timeout(tmp_path, monkeypatch, capsys):
    bench = load_script()
    ref = _stand_in(tmp_path / "LIMEN")
    programs = tmp_path / "programs"
    programs.mkdir()
    (programs / "easy_pickup.py").write_text("")
    fake = {"success": [0.21, 0.63], "steps": 13, "wall_s": 5.0, "compile_s": 1.0}
    monkeypatch.setattr(bench, "run_ours", lambda *a: fake)
    argv = ["--tasks", "xland_easy", "--seeds", "2", "--steps", "13", "--programs", str(programs),
            "--reference", str(ref), "--reference-python", sys.executable, "--reference-timeout", "4"]  # fmt: skip
    assert bench.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    # ours 0.42 / the reference's one finished seed 0.42 (its second hangs and is cut)
    assert lines[2].startswith("  reference            0.42  0.42                             13 ")
    assert lines[2].endswith(" s  ours / reference 1.00  (timed out: 1 of 2 seeds)")
    assert '"timed_out": true' in lines[3] and '"ratio": 1.0' in lines[3]


PARTS = Path(__file__).resolve().parents[2] / "benchmarks" / "fidelity_parts.py"


def test_parts_outside_a_checkout_or_without_the_reference_is_one_line_and_exit_2(tmp_path):
    import subprocess

    run = lambda: subprocess.run([sys.executable, str(PARTS)], cwd=tmp_path, capture_output=True, text=True)  # noqa: E731
    out = run()
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("fidelity_parts: run it from a Lossfunk/LIMEN checkout (no configs/medium_place_near.yaml "
                          "or examples/evolved_interfaces/medium_place_near.py here)\n")  # fmt: skip
    for rel in ("configs/medium_place_near.yaml", "examples/evolved_interfaces/medium_place_near.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    out = run()  # a checkout, but this python has no limen (nor distrax)
    assert out.returncode == 2 and out.stderr.startswith("fidelity_parts: this python cannot import limen")
    assert out.stderr.count("\n") == 1
