"""A run directory from someone else is input, not code: ids that climb out of it, planted
symlinks, fields of the wrong type, a task that names a function, forged cache lines. Each
is refused with one line (exit 2 from a CLI, a RunDirError or CacheError in-process),
writes nothing outside the run and deletes nothing."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from cli_runs import cli_env
from test_evolve import toy_config

import limen_jax as lj
from limen_jax.archive import Archive, ArchiveConfig
from limen_jax.compare import main as compare_main
from limen_jax.config import assemble
from limen_jax.llm.replay import CacheError, ResponseCache
from limen_jax.policies import keep_policies, policy_dir, saved_seeds
from limen_jax.rollout import main as rollout_main
from limen_jax.run.reader import RunDirError, check_id, check_policy_meta, check_state, read_events
from limen_jax.rundir import RunDir

BAD_IDS = ["../../victim", "/etc/passwd", "a" * 300, "caf\u00e9", "..", ".hidden", "a/b", "a\\b", "", 7, None]
PID = "it0000-c00"


def tree(root: Path) -> list[str]:
    """Every path under ``root`` (links not followed), sorted: what a refusal must leave as it was."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def crafted_run(tmp_path: Path, **state: Any) -> Path:
    """A run directory of the toy task with a checkpoint after generation 0, its fields
    replaced by ``state``."""
    run = tmp_path / "run"
    (run / "programs").mkdir(parents=True)
    config = assemble("toy_corridor", toy_config()).to_dict()
    (run / "config.json").write_text(json.dumps(config))
    archive = Archive(ArchiveConfig.from_dict(config["archive"])).to_dict()
    checkpoint = {"iteration": 0, "archive": archive, "strategy": None, "pending": None, "spend_usd": 0.0, **state}
    (run / "state.json").write_text(json.dumps(checkpoint))
    return run


def program_request(pid: str) -> dict[str, Any]:
    return {"kind": "program", "id": pid, "iteration": 1, "island": 0, "operator": "mutate", "parent_ids": [],
            "context_ids": [], "system": "s", "user": "u", "sections": [], "rng_seed": 1, "source": "given",
            "code": "attacker's text"}


@pytest.mark.parametrize("bad", BAD_IDS, ids=ascii)
def test_an_unsafe_id_becomes_no_path(tmp_path, bad):
    with pytest.raises(RunDirError, match=r"^where: not a program id"):
        check_id(bad, "where")
    rd = RunDir(tmp_path / "run")
    with pytest.raises(RunDirError, match="not a program id"):
        rd.write_program(bad, "code")
    with pytest.raises(RunDirError, match="not a program id"):
        rd.write_artifacts(bad, {"obs": b"hlo"})
    with pytest.raises(ValueError, match="not a program id"):
        policy_dir(rd.path, bad, 0)
    assert tree(tmp_path) == ["run", "run/programs"]


def test_a_plain_id_is_one(tmp_path):
    assert check_id(PID, "where") == PID
    rd = RunDir(tmp_path / "run")
    rd.write_program(PID, "code")
    assert (rd.path / "programs" / f"{PID}.py").read_text() == "code"


def test_a_pending_request_that_climbs_out_writes_nothing(tmp_path):
    run = crafted_run(tmp_path, pending=[program_request("../../victim")])
    before = tree(tmp_path)
    with pytest.raises(RunDirError, match=r"state\.json: pending\[0\]\.id: not a program id: '\.\./\.\./victim'"):
        lj.resume(run, verbose=False)
    assert tree(tmp_path) == before  # no victim.py, no .stablehlo, no events line


def test_an_evaluation_of_an_unknown_program_is_refused_by_name(tmp_path):
    pending = [{"kind": "eval", "id": "it0001-e00", "iteration": 1, "program_ids": ["it0000-c07"]}]
    run = crafted_run(tmp_path, pending=pending)
    with pytest.raises(RunDirError, match=r"pending\[0\]\.program_ids\[0\]: it0000-c07 is not a program of the"):
        lj.resume(run, verbose=False)


@pytest.mark.parametrize(("field", "value", "said"), [
    ("iteration", "3", r"iteration: not a whole number"),
    ("iteration", True, r"iteration: not a whole number"),
    ("archive", [], r"archive\.programs: not a list"),
    ("pending", "x", r"pending: neither null nor a list"),
    ("pending", [{"kind": "shell", "id": PID, "iteration": 1}], r"pending\[0\]\.kind: unknown request kind"),
    ("pending", [{**program_request(PID), "rng_seed": -1}], r"pending\[0\]\.rng_seed"),
    ("pending", [{**program_request(PID), "user": 42}], r"pending\[0\]\.user: not a string"),
    ("pending", [{**program_request(PID), "parent_ids": ["/etc"]}], r"pending\[0\]\.parent_ids\[0\]: not a program id"),
    ("spend_usd", -1.0, r"spend_usd: not a finite number >= 0"),
    ("spend_usd", float("nan"), r"spend_usd: not a finite number >= 0"),
    ("usage", [], r"usage: not a JSON object"),
    ("baseline", [], r"baseline: not a JSON object"),
    ("baseline", {"id": "baseline", "success": "x"}, r"baseline\.success: of the wrong type"),
    ("baseline", {"id": "baseline", "success": 0.5, "success_per_seed": 5}, r"baseline\.success_per_seed"),
])
def test_a_checkpoint_field_of_the_wrong_type_is_named(tmp_path, field, value, said):
    state = json.loads((crafted_run(tmp_path) / "state.json").read_text())
    with pytest.raises(RunDirError, match=said):
        check_state({**state, field: value}, Path("run/state.json"))


@pytest.mark.parametrize(("field", "value"), [("metadata", [1]), ("curves", "x"), ("curves", {"return": ["a"]}),
                                            ("success", "high"), ("feedback", None), ("thought", 3),
                                            ("obs_dim", -1), ("evaluations", [])])
def test_an_archive_record_field_of_the_wrong_type_is_named(tmp_path, field, value):
    state = json.loads((crafted_run(tmp_path) / "state.json").read_text())
    state["archive"]["programs"] = [{"id": PID, "code": "", field: value}]
    with pytest.raises(RunDirError, match=rf"archive\.programs\[0\]\.{field}: of the wrong type"):
        check_state(state, Path("state.json"))


def test_an_archive_record_that_climbs_out_is_named(tmp_path):
    state = json.loads((crafted_run(tmp_path) / "state.json").read_text())
    state["archive"]["programs"] = [{"id": "../x", "code": ""}]
    with pytest.raises(RunDirError, match=r"archive\.programs\[0\]\.id: not a program id"):
        check_state(state, Path("state.json"))


@pytest.mark.parametrize(("config", "said"), [
    ([], r"config\.json: not a JSON object"),
    ({"task": 42}, r"config\.json: task is not a task name: 42"),
    ({"task": "toy_corridor", "search": "x"}, r"config\.json: .*search"),
])
def test_a_config_of_the_wrong_type_is_named(tmp_path, config, said):
    run = crafted_run(tmp_path)
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=said):
        lj.resume(run, verbose=False)


@pytest.mark.parametrize(("llm", "said"), [
    ({"mutator": "openai", "model": "m", "base_url": "http://attacker.example/v1"}, r"llm\.base_url 'http://attacker"),
    # this machine's port may be another user's listener on a shared machine
    ({"mutator": "openai", "model": "m", "base_url": "http://127.0.0.1:11434/v1"}, r"llm\.base_url 'http://127"),
    ({"mutator": "ensemble", "models": [{"mutator": "anthropic", "model": "m", "base_url": "https://10.1.2.3",
                                          "key_env": "GITHUB_TOKEN", "price": [0, 0]}]}, r"llm\.models\[0\]\.base_url"),
    # no endpoint named, but another secret would go to the provider as the API key
    ({"mutator": "ensemble", "models": [{"mutator": "openai", "model": "m", "price": [0, 0]},
                                        {"mutator": "anthropic", "model": "m2", "key_env": "AWS_SECRET_ACCESS_KEY"}]},
     r"llm\.models\[1\]\.key_env 'AWS_SECRET_ACCESS_KEY' names the variable"),
])
def test_an_endpoint_the_run_names_is_used_only_when_the_resume_names_it(tmp_path, llm, said):
    # a received run directory must not send the researcher's API key (or any variable
    # key_env names) to a URL of its choosing
    run = crafted_run(tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["llm"].update(llm)
    (run / "config.json").write_text(json.dumps(config))
    before = tree(run)
    with pytest.raises(RunDirError, match=said):
        lj.resume(run, verbose=False)
    assert tree(run) == before
    from limen_jax.run.start import recorded_config  # named again by the resume: used
    assert recorded_config(RunDir(run, create=False), {"llm": {k: llm[k] for k in ("base_url", "models") if k in llm}})
    config["llm"].update(base_url=None, models=[{"mutator": "anthropic", "model": "m", "key_env": "ANTHROPIC_API_KEY"}])
    (run / "config.json").write_text(json.dumps(config))  # the provider's own key variable: used
    assert recorded_config(RunDir(run, create=False), {}).llm.models[0]["key_env"] == "ANTHROPIC_API_KEY"


def test_a_checker_limit_the_run_loosens_is_used_only_when_the_resume_names_it(tmp_path):
    # a received run directory must not raise the sandbox's stage limits (a pending program
    # would then hold the resume for hours) nor its memory or sample sizes
    from limen_jax.run.start import recorded_config

    run = crafted_run(tmp_path)
    config = json.loads((run / "config.json").read_text())
    for loose in ({"exec_seconds": 3600.0}, {"worker_memory_mb": 2**40}, {"sample_size": 2**26}):
        config["checker"] = loose
        (run / "config.json").write_text(json.dumps(config))
        key = next(iter(loose))
        with pytest.raises(RunDirError, match=rf"checker\.{key} .* loosens the checker"):
            lj.resume(run, verbose=False)
        assert recorded_config(RunDir(run, create=False), {"checker": loose}).checker == loose
    config["checker"] = {"exec_seconds": 2.0, "sample_seed": 7}  # tighter, or no limit at all: used
    (run / "config.json").write_text(json.dumps(config))
    assert recorded_config(RunDir(run, create=False), {}).checker == {"exec_seconds": 2.0, "sample_seed": 7}


@pytest.mark.parametrize("entry", ["programs", "state.json", "events.jsonl", "llm_cache.jsonl", "policies"])
def test_a_planted_symlink_is_refused_on_opening(tmp_path, entry):
    run = crafted_run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("keep me")
    target = outside if entry in ("programs", "policies") else outside / "victim"
    if os.path.lexists(run / entry):
        os.replace(run / entry, run / f"{entry}.moved")
    (run / entry).symlink_to(target)
    with pytest.raises(RunDirError, match=f"{entry} is a symlink"):
        lj.resume(run, verbose=False)
    assert tree(outside) == ["victim"] and (outside / "victim").read_text() == "keep me"


def test_a_planted_file_link_is_replaced_not_followed(tmp_path):
    rd = RunDir(tmp_path / "run")
    victim, tmp_victim = tmp_path / "victim.py", tmp_path / "tmp_victim"
    victim.write_text("keep me")
    tmp_victim.write_text("keep me too")
    (rd.path / "programs" / f"{PID}.py").symlink_to(victim)
    (rd.path / "programs" / f"{PID}.obs.stablehlo.tmp").symlink_to(tmp_victim)
    rd.write_program(PID, "new")
    rd.write_artifacts(PID, {"obs": b"hlo"})
    assert victim.read_text() == "keep me" and tmp_victim.read_text() == "keep me too"
    assert not (rd.path / "programs" / f"{PID}.py").is_symlink()
    assert (rd.path / "programs" / f"{PID}.py").read_text() == "new"
    assert (rd.path / "programs" / f"{PID}.obs.stablehlo").read_bytes() == b"hlo"


def test_programs_turned_into_a_link_after_opening_takes_no_write(tmp_path):
    rd = RunDir(tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    (rd.path / "programs").rmdir()
    (rd.path / "programs").symlink_to(outside)
    with pytest.raises(RunDirError, match="programs is a link or not a folder"):
        rd.write_program(PID, "code")
    assert tree(outside) == []


RESULT = SimpleNamespace(policies=[object()], success=1.0)  # refused before any policy is saved


@pytest.mark.parametrize("planted", ["policies", f"policies/{PID}"])
def test_a_policies_link_is_neither_followed_nor_deleted_through(tmp_path, planted):
    run = tmp_path / "run"
    (run / planted).parent.mkdir(parents=True)
    outside = tmp_path / "outside"
    (outside / PID / "seed0").mkdir(parents=True)
    (run / planted).symlink_to(outside if planted == "policies" else outside / PID)
    with pytest.raises(RunDirError, match="is a link"):
        keep_policies(run, [(PID, RESULT)], "all")
    with pytest.raises(RunDirError, match="is a link"):
        saved_seeds(run, PID)
    assert tree(outside) == [PID, f"{PID}/seed0"]


def test_an_unsafe_policy_id_deletes_nothing(tmp_path):
    run = tmp_path / "a" / "run"
    (run / "policies").mkdir(parents=True)
    victim = tmp_path / "a" / "victim"
    victim.mkdir()
    with pytest.raises(RunDirError, match="not a program id"):
        keep_policies(run, [("../../victim", RESULT)], "all")
    assert victim.is_dir()


def kept_policy(run: Path, meta: dict[str, Any], task: str = "toy_corridor") -> None:
    seed = run / "policies" / PID / "seed0"
    (seed / "arrays").mkdir(parents=True)
    (seed / "policy.json").write_text(json.dumps(meta))
    (run / "config.json").write_text(json.dumps({"task": task}))


GOOD_META = {"task": "toy_corridor", "seed": 0, "obs_dim": 2, "reward_terms": [], "task_params": {}}


@pytest.mark.parametrize(("field", "value"), [("seed", "0"), ("obs_dim", None), ("task", ["x"]),
                                              ("reward_terms", "r"), ("task_params", {"g": "1"}), ("mode", 3)])
def test_policy_json_of_the_wrong_type_is_one_line(tmp_path, capsys, field, value):
    with pytest.raises(RunDirError, match=f"policy.json: {field}: not"):
        check_policy_meta({**GOOD_META, field: value}, Path("policy.json"))
    kept_policy(tmp_path / "run", {**GOOD_META, field: value})
    assert rollout_main([str(tmp_path / "run"), PID]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"policy.json: {field}: not" in err


def test_a_policy_whose_arrays_leave_the_run_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    kept_policy(run, GOOD_META)
    arrays = run / "policies" / PID / "seed0" / "arrays"
    arrays.rmdir()
    (tmp_path / "elsewhere").mkdir()
    arrays.symlink_to(tmp_path / "elsewhere")
    assert rollout_main([str(run), PID]) == 2
    assert "is not a folder inside" in capsys.readouterr().err


def test_events_of_the_wrong_type_are_skipped_and_counted(tmp_path):
    lines = [{"event": "iteration", "iteration": 0, "wall_s": 1.5}, {"event": "iteration", "iteration": "3"},
             {"event": "program", "id": PID, "parents": "it0000-c01"}, {"event": 7}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    events, skipped = read_events(tmp_path)
    assert events == lines[:1] and skipped == 2


def test_an_event_line_longer_than_any_the_engine_writes_is_skipped_in_bounded_memory(tmp_path, monkeypatch):
    import io
    import tracemalloc

    from limen_jax.run import reader

    monkeypatch.setattr(reader, "MAX_EVENT_LINE_BYTES", 4096)
    good = {"event": "iteration", "iteration": 1, "wall_s": 2.0}
    huge = '{"event": "note", "text": "' + "x" * 3_000_000 + '"}\n'
    (tmp_path / "events.jsonl").write_text(huge + json.dumps(good) + "\n" + huge[:10_000])  # the last one unended
    tracemalloc.start()
    events, skipped = read_events(tmp_path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert events == [good] and skipped == 2
    assert peak < 200_000  # the 3 MB line was never held whole
    lines = list(reader.json_lines(io.BytesIO(b"ab\n" + b"c" * 9 + b"\nde"), 4))
    assert lines == ["ab\n", None, "de"]


def test_compare_refuses_records_of_the_wrong_type(tmp_path, capsys):
    run = crafted_run(tmp_path)
    state = json.loads((run / "state.json").read_text())
    state["archive"]["programs"] = [{"id": PID, "iteration": "0"}]
    (run / "state.json").write_text(json.dumps(state))
    assert compare_main([str(run)]) == 2
    assert "archive.programs[0].iteration: of the wrong type" in capsys.readouterr().err


# --- a task that names a function: nothing may call it --------------------------------------

FUNCTIONS = ["os:abort", "signal:pause", "tempfile:mkdtemp"]
ENTRIES = {
    "resume": ["limen_jax.evolve", "--resume", "run"],
    "replay": ["limen_jax.evolve", "--replay-from", "run", "--run-dir", "again"],
    "rollout": ["limen_jax.rollout", "run", PID],
    "demos": ["limen_jax.demos", "--from-policy", "run", PID, "--random", "2", "--out", "demos.npz"],
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("task", FUNCTIONS)
def test_a_task_naming_a_function_is_never_called(tmp_path, entry, task):
    kept_policy(tmp_path / "run", {**GOOD_META, "task": task}, task=task)
    temp = tmp_path / "temp"  # where tempfile:mkdtemp would make its folder
    temp.mkdir()
    before = tree(tmp_path)
    out = subprocess.run([sys.executable, "-m", *ENTRIES[entry]], cwd=tmp_path, env={**cli_env(), "TMPDIR": str(temp)},
                         capture_output=True, text=True, timeout=120)  # signal:pause would hang to the timeout
    assert out.returncode == 2, out.stderr[-2000:]  # os:abort would exit 134
    assert out.stderr.count("\n") == 1 and f"task {task!r} is not a registered task" in out.stderr
    assert "Traceback" not in out.stderr
    assert tree(tmp_path) == before and list(temp.iterdir()) == []


def test_a_recorded_family_name_still_resolves():
    from limen_jax.registry import check_recorded

    assert check_recorded("playground:CartpoleBalance", "config.json") == "playground:CartpoleBalance"
    with pytest.raises(ValueError, match="not a registered task"):
        check_recorded("playground:../../x", "config.json")


# --- the LLM cache: no forged answer, no spend forged downward -------------------------------

def cache_line(**over: Any) -> str:
    response = {"text": "answer", "model": "m", "cached": False, "error": None, "metadata": {}, "input_tokens": 10,
                "output_tokens": 5, "cost_usd": 0.01, "retries": 0}
    entry = {"v": 1, "key": "k" * 64, "sample": "0:0", "system": "s", "user": "u", "response": response}
    for name, value in over.items():
        if name == "key":
            entry.pop("key") if value is None else entry.update(key=value)
        else:
            response[name] = value
    return json.dumps(entry) + "\n"


@pytest.mark.parametrize(("over", "said"), [
    ({"key": None}, r":1: key: missing or not a string"),
    ({"key": 5}, r":1: key: missing or not a string"),
    ({"text": 42}, r":1: response\.text: not a string"),
    ({"cost_usd": -0.5}, r":1: response\.cost_usd: not a finite number >= 0"),
    ({"cost_usd": float("nan")}, r":1: response\.cost_usd: not a finite number >= 0"),
    ({"cost_usd": float("inf")}, r":1: response\.cost_usd: not a finite number >= 0"),
    ({"input_tokens": -3}, r":1: response\.input_tokens: not a whole number >= 0"),
    ({"retries": 1.5}, r":1: response\.retries: not a whole number >= 0"),
    ({"cached": True}, r":1: response\.cached: a replayed answer costs nothing"),
])
def test_a_forged_cache_line_is_refused_by_line_and_field(tmp_path, over, said):
    path = tmp_path / "llm_cache.jsonl"
    path.write_text(cache_line(**over) + cache_line(key="b" * 64))
    with pytest.raises(CacheError, match=said):
        ResponseCache(path)


def test_a_cache_line_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    path.write_bytes(cache_line().encode().replace(b"answer", b"ans\xffwer"))
    with pytest.raises(CacheError, match=r":1: not UTF-8 text"):
        ResponseCache(path)


def test_a_well_formed_cache_sums_its_ledger(tmp_path):
    path = tmp_path / "llm_cache.jsonl"
    path.write_text(cache_line() + cache_line(key="b" * 64, cost_usd=0.02) + '{"v": 1, "ke')  # a torn last line
    cache = ResponseCache(path)
    assert len(cache) == 2 and cache.skipped_lines == 1
    assert cache.ledger.calls == 2 and abs(cache.ledger.cost_usd - 0.03) < 1e-12 and cache.ledger.input_tokens == 20


def test_a_cache_that_lost_spend_is_refused_on_resume(tmp_path):
    run = crafted_run(tmp_path, spend_usd=0.05)
    (run / "llm_cache.jsonl").write_text(cache_line())  # $0.01 left of the $0.05 the checkpoint saw paid
    before = tree(tmp_path)
    with pytest.raises(RunDirError, match=r"llm_cache\.jsonl: its ledger sums to \$0\.010000 but .*\$0\.050000"):
        lj.resume(run, verbose=False)
    assert tree(tmp_path) == before


@pytest.mark.parametrize("entry", ["events.jsonl", "llm_cache.jsonl", "state.json"])
@pytest.mark.parametrize("kind", ["fifo", "folder", "hard link"])
def test_an_entry_that_is_no_file_of_its_own_is_refused_on_opening(tmp_path, entry, kind):
    run = crafted_run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text('{"keep": "me"}\n')
    with contextlib.suppress(FileNotFoundError):
        (run / entry).unlink()
    if kind == "fifo":
        os.mkfifo(run / entry)  # the first read or append would wait forever
    elif kind == "folder":
        (run / entry).mkdir()
    else:
        os.link(victim, run / entry)  # an append or a repair would change the victim
    said = "is a hard link" if kind == "hard link" else "is not a regular file"
    with pytest.raises(RunDirError, match=f"{entry} {said}"):
        lj.resume(run, verbose=False)
    assert victim.read_text() == '{"keep": "me"}\n' and tree(outside) == ["victim"]


def test_a_cache_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "llm_cache.jsonl")
    with pytest.raises(CacheError, match=r"llm_cache\.jsonl: not a regular file"):
        ResponseCache(tmp_path / "llm_cache.jsonl")


@pytest.mark.parametrize(("config", "said"), [
    (None, "is not a file inside the run directory"),  # a FIFO
    ("{nope", "is not valid JSON"),
    ('{"search": {"pipeline": ["on"]}}', r"search\.pipeline: neither"),
])
def test_a_replayed_runs_config_is_read_as_untrusted(tmp_path, config, said):
    from limen_jax.run.pipeline import resolve_pipeline
    if config is None:
        os.mkfifo(tmp_path / "config.json")
    else:
        (tmp_path / "config.json").write_text(config)
    search = SimpleNamespace(pipeline="auto", iterations=2)
    llm = SimpleNamespace(mutator="replay", models=[], replay_from=str(tmp_path))
    with pytest.raises(RunDirError, match=said):
        resolve_pipeline(search, llm, lookahead=1, custom_mutator=False, saved=None)


@pytest.mark.parametrize(("change", "said"), [
    ({"ppo": {"actor_hidden": [2**30, 2**30]}}, "describe a network other than the one its arrays hold"),
    ({"ppo": "x"}, "ppo: not a network this version builds"),
    ({"ppo": {"bogus": 1}}, "ppo: not a network this version builds"),
    ({"width": 2**40}, "width: not a whole number"),
    ({"width": None}, "width: not a whole number"),
])
def test_a_policy_json_that_does_not_describe_its_arrays_is_one_line(change, said):
    import jax

    from limen_jax.rl.config import PPOConfig
    from limen_jax.rl.networks import ActorCritic
    from limen_jax.rl.normalize import ObsStats
    from limen_jax.rl.policy import Policy
    from limen_jax.rl.rollouts import check_network
    from limen_jax.task import make

    task, config = make("toy_corridor"), PPOConfig(actor_hidden=(8,), critic_hidden=(8,))
    params = ActorCritic(config, task.action_space).init(jax.random.key(0), 4)
    stats = ObsStats(np.zeros(4, np.float32), np.ones(4, np.float32), np.float32(1))
    meta = {"obs_dim": 4, "width": 4, "ppo": config.to_dict()}
    check_network(Policy(params, stats, meta), task)  # as trained: accepted
    ppo = {**meta["ppo"], **change["ppo"]} if isinstance(change.get("ppo"), dict) else change.get("ppo", meta["ppo"])
    with pytest.raises(ValueError, match=said):
        check_network(Policy(params, stats, {**meta, **change, "ppo": ppo}), task)


def test_a_link_planted_at_a_plots_name_is_replaced_not_written_through(tmp_path):
    from limen_jax.plots import _pyplot, save_atomic

    fig, _ = _pyplot().subplots()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    for name in (".progress.png.tmp", "progress.png.tmp", "progress.png"):  # the old and new temporary names
        (run / name).symlink_to(victim)
    save_atomic(fig, run / "progress.png")
    assert victim.read_text() == "keep me"
    assert not (run / "progress.png").is_symlink() and (run / "progress.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("plant", ["fifo", "link out", "device"])
def test_a_kept_policys_arrays_hold_only_plain_files(tmp_path, capsys, plant):
    run = tmp_path / "run"
    kept_policy(run, GOOD_META)
    arrays = run / "policies" / PID / "seed0" / "arrays"
    entry = arrays / "_METADATA"
    with contextlib.suppress(FileNotFoundError):
        entry.unlink()
    if plant == "fifo":
        os.mkfifo(entry)  # the array store would wait on it forever
    elif plant == "link out":
        (tmp_path / "victim").write_text("{}")
        entry.symlink_to(tmp_path / "victim")
    else:
        entry.symlink_to("/dev/zero")  # read forever
    assert rollout_main([str(run), PID]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "_METADATA is a link, FIFO or device" in err


def test_a_cache_line_too_long_to_be_an_answer_is_refused_unread(tmp_path, monkeypatch):
    import limen_jax.llm.replay as replay

    monkeypatch.setattr(replay, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "llm_cache.jsonl"
    path.write_text(cache_line() + '{"key": "' + "k" * 5000 + '"}\n')
    with pytest.raises(CacheError, match=r":2: longer than 0 MiB"):
        ResponseCache(path)
    path.write_text(cache_line() + cache_line(key="b" * 64))  # ordinary lines: read as before
    assert len(ResponseCache(path)) == 2
