"""EvolveConfig: presets, strict loading, CLI overrides."""

import json

import pytest

from limen_jax.config import EvolveConfig, SearchConfig
from limen_jax.run.cli import _parser, config_from_args
from limen_jax.run.start import check_settings


def test_presets_follow_the_paper_and_cpu_budgets():
    paper = EvolveConfig.preset_for("xland_hard", "paper")
    assert (paper.search.iterations, paper.search.candidates, paper.search.seeds) == (30, 1, 3)
    cascade = paper.cascade
    assert (cascade.short_steps, cascade.full_steps, cascade.threshold) == (3_000_000, 5_000_000, 0.01)
    cpu = EvolveConfig.preset_for("xland_easy", "cpu")
    assert cpu.cascade.full_steps < paper.cascade.full_steps and cpu.cascade.threshold == 0.05
    with pytest.raises(ValueError, match="unknown preset"):
        EvolveConfig.preset_for("xland_easy", "tpu")


@pytest.mark.parametrize("task", ["go1_push", "panda_track", "ant", "humanoid", "hopper", "walker2d", "halfcheetah"])
def test_mujoco_cpu_preset_is_a_tiny_end_to_end_run(task):
    from limen_jax.rl import PPOConfig

    cpu, paper = EvolveConfig.preset_for(task, "cpu"), EvolveConfig.preset_for(task, "paper")
    assert (cpu.cascade.short_steps, cpu.cascade.full_steps) == (0, 25_600)
    assert (cpu.search.iterations, cpu.search.candidates, cpu.search.seeds) == (1, 2, 2)
    assert paper.cascade.full_steps >= 15_000_000
    ppo = PPOConfig.preset(task, "cpu")
    assert (ppo.num_envs, ppo.eval_episodes, ppo.activation) == (64, 32, "swish")
    assert PPOConfig.preset(task, "paper").num_envs >= 2048


def test_round_trip_and_unknown_keys_are_errors():
    cfg = EvolveConfig.preset_for("xland_medium", "cpu", seed=3)
    assert EvolveConfig.from_dict(cfg.to_dict()) == cfg
    bad = cfg.to_dict()
    bad["search"]["iteratoins"] = 5
    with pytest.raises(ValueError, match="iteratoins"):
        EvolveConfig.from_dict(bad)
    with pytest.raises(ValueError, match="mode"):
        SearchConfig(mode="bogus")
    # the strategy and its options are judged where the run starts: the config imports no search code
    with pytest.raises(ValueError, match="unknown search strategy 'bogus'"):
        check_settings(EvolveConfig(search=SearchConfig(strategy="bogus")))
    with pytest.raises(ValueError, match="prescreen 'demos:2'"):
        check_settings(EvolveConfig(search=SearchConfig(prescreen="demos:2")))


def test_cli_flags_override_the_preset():
    args = _parser().parse_args(["--task", "xland_easy", "--iterations", "7", "--candidates", "3", "--seeds", "5",
                                 "--mode", "reward_only", "--mutator", "offline", "--full-steps", "1234",
                                 "--seed", "9", "--strategy", "greedy"])
    cfg = config_from_args(args)
    assert (cfg.search.iterations, cfg.search.candidates, cfg.search.seeds) == (7, 3, 5)
    assert cfg.search.mode == "reward_only" and cfg.search.strategy == "greedy"
    assert cfg.llm.mutator == "offline" and cfg.cascade.full_steps == 1234 and cfg.seed == 9
    replay = config_from_args(_parser().parse_args(["--task", "xland_easy", "--replay-from", "runs/x"]))
    assert replay.llm.mutator == "replay" and replay.llm.replay_from == "runs/x"


def test_the_task_is_required_unless_a_replayed_run_names_it(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="--task is required"):
        config_from_args(_parser().parse_args([]))
    (tmp_path / "config.json").write_text('{"task": "xland_medium"}')
    replay = config_from_args(_parser().parse_args(["--replay-from", str(tmp_path)]))
    assert replay.task == "xland_medium" and replay.cascade.full_steps == 250_000


def test_ppo_and_checker_overrides_are_checked_when_the_config_is_built():
    import pytest

    from limen_jax.config import EvolveConfig

    base = EvolveConfig.preset_for("xland_easy").to_dict()
    with pytest.raises(ValueError, match=r"ppo: unknown PPOConfig fields \['learning_rat'\]"):
        EvolveConfig.from_dict({**base, "ppo": {"learning_rat": 1e-3}})
    # value types too: a string learning rate or a fractional env count fails here, naming the field
    with pytest.raises(ValueError, match=r"ppo: PPOConfig.lr: expected a number, got '3e-4'"):
        EvolveConfig.from_dict({**base, "ppo": {"lr": "3e-4"}})
    with pytest.raises(ValueError, match=r"ppo: PPOConfig.num_envs: expected an integer, got 256.5"):
        EvolveConfig.from_dict({**base, "ppo": {"num_envs": 256.5}})
    with pytest.raises(ValueError, match=r"PPOConfig.actor_hidden\[1\]: expected an integer, got '64'"):
        EvolveConfig.from_dict({**base, "ppo": {"actor_hidden": [64, "64"]}})
    with pytest.raises(ValueError, match=r"PPOConfig.normalize_obs: expected true or false, got 1"):
        EvolveConfig.from_dict({**base, "ppo": {"normalize_obs": 1}})
    with pytest.raises(ValueError, match=r"checker: Limits.sample_size: expected an integer, got '64'"):
        EvolveConfig.from_dict({**base, "checker": {"sample_size": "64"}})
    from limen_jax.rl import PPOConfig

    ok = PPOConfig().replace(lr=1, actor_hidden=[32, 32], vf_clip=None)
    assert ok.lr == 1.0 and isinstance(ok.lr, float) and ok.actor_hidden == (32, 32) and ok.vf_clip is None
    assert PPOConfig().replace(vf_clip=0.2).vf_clip == 0.2
    with pytest.raises(ValueError, match=r"checker: unknown Limits fields \['max_obs'\]"):
        EvolveConfig.from_dict({**base, "checker": {"max_obs": 4}})
    cfg = EvolveConfig.from_dict({**base, "checker": {"max_obs_dim": 4}, "prompt": {"num_failures": 1},
                                  "archive": {"num_islands": 2, "grid": {"ast_bin_width": 10}}})
    assert cfg.checker == {"max_obs_dim": 4} and cfg.prompt.num_failures == 1
    assert cfg.archive.num_islands == 2 and cfg.archive.grid.ast_bin_width == 10
    assert EvolveConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("task", ["xland_easy", "xland_medium", "xland_hard", "go1_push", "panda_track", "ant"])
def test_reference_rewards_sit_inside_the_ast_axis(task):
    """Each task's grid spreads its programs' reward sizes: the reference program lands in
    a bin below the open-ended last one, with room above it (xland_medium and xland_hard
    declare 60-node bins; at the default 25 their references sat in the last bin)."""
    from limen_envs import interfaces

    from limen_jax.program.descriptors import reward_ast_size

    grid = EvolveConfig.preset_for(task, "paper").archive.grid
    assert grid == EvolveConfig.preset_for(task, "cpu").archive.grid
    size = reward_ast_size(interfaces.path(task).read_text())
    assert 0 < grid.ast_bin(size) <= grid.num_ast_bins - 3, (task, size, grid.ast_bin_width)
    width = {"xland_medium": 60, "xland_hard": 60}.get(task, 25)
    assert grid.ast_bin_width == width


def test_budgets_are_checked_where_the_config_is_built():
    """A notebook gets the ValueError the CLI prints; --full-steps 0 trained one update before."""
    from limen_jax.config import CascadeConfig, LLMConfig

    for build, message in (
        (lambda: CascadeConfig(full_steps=0), "cascade.full_steps must be a whole number >= 1, got 0"),
        (lambda: CascadeConfig(short_steps=-1), "cascade.short_steps must be a whole number >= 0, got -1"),
        (lambda: CascadeConfig(full_steps=1e6), "cascade.full_steps must be a whole number >= 1, got 1000000.0"),
        (lambda: SearchConfig(iterations=-1), "search.iterations must be a whole number >= 0, got -1"),
        (lambda: SearchConfig(programs=0), "search.programs must be a whole number >= 1, got 0"),
        (lambda: SearchConfig(initial=0), "search.initial must be a whole number >= 1, got 0"),
        (lambda: LLMConfig(concurrency=0), "llm.concurrency must be a whole number >= 1, got 0"),
        (lambda: LLMConfig(max_tokens=True), "llm.max_tokens must be a whole number >= 1, got True"),
    ):
        with pytest.raises(ValueError) as refused:
            build()
        assert str(refused.value) == message
    assert CascadeConfig(short_steps=0, full_steps=1).full_steps == 1 and SearchConfig(programs=None).programs is None


def test_no_baseline_and_the_quick_preset_come_from_the_command_line():
    assert config_from_args(_parser().parse_args(["--task", "xland_easy"])).search.baseline is True
    assert config_from_args(_parser().parse_args(["--task", "xland_easy", "--no-baseline"])).search.baseline is False
    quick = config_from_args(_parser().parse_args(["--task", "xland_hard", "--preset", "quick"]))
    assert (quick.cascade.full_steps, quick.search.iterations, quick.search.candidates, quick.search.seeds) == (
        300_000, 1, 2, 1)
    # a task that declares no quick budget gets its cpu one
    assert EvolveConfig.preset_for("xland_easy", "quick").search == EvolveConfig.preset_for("xland_easy").search


def test_a_run_saved_before_a_setting_existed_resumes_with_its_value():
    from limen_jax.config import EvolveConfig, config_changes

    new = EvolveConfig().to_dict()
    saved = json.loads(json.dumps(new))
    del saved["search"]["baseline"], saved["search"]["dedupe"]
    assert config_changes(saved, new) == ([], [])
    saved["search"]["candidates"] = new["search"]["candidates"] + 1
    assert config_changes(saved, new) == ([], ["search.candidates"])


def test_the_evolve_cli_takes_every_preset_the_tasks_declare():
    from limen_jax.task import PRESETS

    for preset in PRESETS:
        assert config_from_args(_parser().parse_args(["--task", "xland_easy", "--preset", preset])).preset == preset


@pytest.mark.parametrize(("section", "key", "value", "said"), [
    ("llm", "max_cost_usd", float("nan"), r"llm\.max_cost_usd must be a number >= 0"),  # NaN: a cap never reached
    ("llm", "max_cost_usd", -1.0, r"llm\.max_cost_usd must be a number >= 0"),
    ("llm", "timeout_s", float("nan"), r"llm\.timeout_s must be > 0"),
    ("llm", "temperature", float("nan"), r"llm\.temperature must be a finite number"),
    ("llm", "max_retries", 10**9, r"llm\.max_retries must be at most 50, got 1000000000"),  # an outage retried for ever
    ("llm", "concurrency", 10**6, r"llm\.concurrency must be at most 1024"),
    ("llm", "timeout_s", 1e9, r"llm\.timeout_s must be > 0 and at most 3600"),
    ("archive", "num_islands", 10**9, r"num_islands must be from 1 to 1000"),
])
def test_a_config_json_value_that_would_lift_the_cap_or_blow_up_memory_is_refused(section, key, value, said):
    data = EvolveConfig.preset_for("toy_corridor").to_dict()
    data[section][key] = value
    with pytest.raises(ValueError, match=said):
        EvolveConfig.from_dict(json.loads(json.dumps(data)))


def test_a_grid_of_too_many_cells_is_refused_before_it_is_made():
    data = EvolveConfig.preset_for("toy_corridor").to_dict()
    data["archive"]["grid"]["num_ast_bins"] = 10**9
    with pytest.raises(ValueError, match=r"the grid would have \d+ cells"):
        EvolveConfig.from_dict(data)
