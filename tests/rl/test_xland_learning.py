"""PPO learns a real task in CI: XLand easy with the CPU preset, the bundled reference
interface and a hand-written one. Budget: 300k env steps x 2 seeds, both interfaces in one
batch (26 s on this 2-core CPU, 8 s of it compiling; both reached 0.98-1.0)."""

from interfaces import xland_easy_good

import limen_jax as lj
from limen_jax.rl import PPOConfig, train_batch


def test_good_interfaces_solve_xland_easy_on_cpu():
    from limen_envs import interfaces as reference

    from limen_jax.program import compile_interface

    task = lj.make("xland_easy")
    ref = compile_interface(reference.path("xland_easy").read_text(), task, name="reference")
    config = PPOConfig.preset("xland_easy", "cpu")
    result = train_batch(task, [ref, xland_easy_good(task)], seeds=2, total_steps=300_000, config=config)
    print(result.summary(), f"wall {result.wall_s:.0f} s, compile {result.compile_s:.0f} s")
    assert result.success_mean.min() >= 0.9, result.summary()
