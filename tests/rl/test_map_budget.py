"""The memory-map budget (limen_jax/xla_maps.py): a process that trains many shapes lets go
of cached executables before XLA's CPU runtime reaches vm.max_map_count, where it would
crash with a segmentation fault, and refuses with a MemoryError when it cannot."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from limen_jax import xla_maps

HERE = os.path.dirname(os.path.abspath(__file__))


def test_maps_are_counted_from_the_kernel_and_an_executable_spends_them():
    with open("/proc/self/maps") as f:
        assert abs(xla_maps.maps_in_use() - len(f.readlines())) <= 2
    with open("/proc/sys/vm/max_map_count") as f:
        assert xla_maps.map_limit() == int(f.read())
    before = xla_maps.maps_in_use()
    keep = jax.jit(lambda x: jnp.sin(x) @ jnp.cos(x).T + 0.123456).lower(jnp.ones((8, 8))).compile()
    assert xla_maps.maps_in_use() > before  # the executable's code is mapped region by region
    del keep


def test_past_half_the_cap_the_caches_are_emptied_and_past_nine_tenths_nothing_loads(monkeypatch):
    calls = []
    monkeypatch.setattr(xla_maps, "_releasers", [lambda: calls.append("released")])
    counts = iter([500, 501, 700, 400, 700, 950])
    monkeypatch.setattr(xla_maps, "maps_in_use", lambda: next(counts))
    xla_maps.make_room(limit=1000)  # 500: at half, nothing to do
    assert calls == []
    xla_maps.make_room(limit=1000)  # 501, then 700 after releasing: under 900, go on
    assert calls == ["released"]
    xla_maps.make_room(limit=1000)  # 400 now
    assert calls == ["released"]
    with pytest.raises(xla_maps.ExecutableMapsExhausted, match=r"950 memory regions of the 1000 .*vm.max_map_count"):
        xla_maps.make_room(limit=1000)  # 700, and 950 after releasing
    assert calls == ["released", "released"]
    assert issubclass(xla_maps.ExecutableMapsExhausted, MemoryError)  # the machinery's: a search stops resumably
    xla_maps.make_room(limit=0)  # no cap known: never counts
    monkeypatch.setattr(xla_maps, "_LIMIT", "/nonexistent/max_map_count")
    assert xla_maps.map_limit() is None


# Trains the corridor under one config after another in a fresh process whose cap is
# pretended to be LIMIT = 2 x (its maps at start + 1500); "hold" keeps every trainer alive.
_SWEEP = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import jax
    from interfaces import corridor_interfaces
    from toy_tasks import Corridor
    from limen_jax import xla_maps
    from limen_jax.rl import BatchTrainer, PPOConfig

    ifaces = [corridor_interfaces()["obs7"]]
    cfg = PPOConfig(num_envs=8, rollout_len=4, epochs=1, minibatches=1, eval_episodes=8)
    def train(trainer):
        trainer.run(trainer.init([0], 1), 1)
        trainer.evaluate(trainer.init([0], 1), jax.random.key(0))

    train(BatchTrainer(Corridor(), ifaces, cfg, 1))  # imports and first compiles
    limit = 2 * (xla_maps.maps_in_use() + 1500)
    xla_maps.map_limit = lambda: limit
    released = []
    xla_maps.on_pressure(lambda: released.append(xla_maps.maps_in_use()))
    held, peak = [], 0
    try:
        for i in range(int(sys.argv[3])):
            trainer = BatchTrainer(Corridor(), ifaces, cfg.replace(lr=1e-3 * (i + 1)), 1)
            train(trainer)
            if sys.argv[2] == "hold":
                held.append(trainer)
            peak = max(peak, xla_maps.maps_in_use())
    except MemoryError as e:
        print("refused after", i, "configs:", type(e).__name__, e)
        sys.exit(3)
    print("configs", i + 1, "releases", len(released), "peak", peak, "limit", limit)
""")


def _sweep(tmp_path, mode, configs):
    script = tmp_path / "sweep.py"
    script.write_text(_SWEEP)
    env = {**os.environ, "LIMEN_JAX_XLA_CACHE": "off", "JAX_PLATFORMS": "cpu"}
    argv = [sys.executable, str(script), HERE, mode, str(configs)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


def test_a_config_sweep_in_one_process_lets_go_of_old_executables(tmp_path):
    out = _sweep(tmp_path, "drop", 7)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    words = out.stdout.split()
    releases, peak, limit = (int(words[i + 1]) for i in (words.index(w) for w in ("releases", "peak", "limit")))
    assert releases >= 1 and peak <= 0.9 * limit


def test_a_sweep_that_holds_every_trainer_is_refused_in_one_line_not_crashed(tmp_path):
    out = _sweep(tmp_path, "hold", 16)
    assert out.returncode == 3, out.stdout + out.stderr[-3000:]
    assert "refused after" in out.stdout and "ExecutableMapsExhausted" in out.stdout
    assert "vm.max_map_count" in out.stdout
