"""The rda strategy end to end on the toy corridor (2 RDA iterations x 2 candidates):
through lj.evolve with the offline mutator; from the CLI, stopped after a batch and
resumed into the same run; replayed from its cache; and with an LLM behind a local fake
Messages API, where each role's prompt is checked as sent. In the default suite, a cheap
run (1 iteration) from the CLI killed with SIGKILL while the critic's episodes roll out,
resumed into the run never killed."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import assert_same_programs, checkpoint, kill_and_resume, logged
from fake_anthropic import FakeAnthropic, Reply
from PIL import Image
from test_evolve import toy_config

import limen_jax as lj
from limen_jax.llm.offline import OfflineAuthor
from limen_jax.search.templates import load_template

HERE = Path(__file__).parent
ROOT = HERE.parents[2]

# 1 decomposition + 2 iterations x (programs, episodes, critic) + 1 reflection = 8 batches
CONFIG = toy_config(search={"iterations": 8, "candidates": 2, "strategy": "rda", "options": {"iterations": 2}})
STAGES = ["decompose", "programs", "episodes", "critic", "reflect", "programs", "episodes", "critic"]


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


def brief(records) -> list[tuple]:
    return [(r["id"], r["code"], r["success_per_seed"], r["parent_ids"], r["evaluations"]) for r in records]


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory):
    return lj.evolve("toy_corridor", CONFIG, run_dir=tmp_path_factory.mktemp("rda") / "run", verbose=False)


@pytest.mark.slow
def test_offline_rda_decomposes_trains_named_terms_critiques_rollouts_and_keeps_the_best(offline_run):
    run = offline_run
    state = json.loads((run.run_dir / "state.json").read_text())["strategy"]
    assert run.complete and run.stopped.startswith("finished early: rda: 2 iterations; best by critic it000")
    assert [r.id for r in run.records] == ["it0001-c00", "it0001-c01", "it0005-c00", "it0005-c01"]
    log = events(run.run_dir)
    assert [e["stage"] for e in log if e["event"] == "rda"] == STAGES
    # the offline decomposition is the catalog's dense then required term; reflection keeps them
    assert [s["name"] for s in state["subtasks"]] == ["approach", "goal"]
    assert all("sums above 0" in s["description"] for s in state["subtasks"])
    texts = [e for e in log if e["event"] == "prompt" and e.get("kind") == "text"]
    assert [e["role"] for e in texts] == ["decompose", "critic", "critic", "reflect_subtasks", "critic", "critic"]
    for r in run.records:
        assert set(r.eval_terms) == {"approach", "goal"}  # one named reward term per subtask
        episodes = r.evaluations["episodes"]
        assert len(episodes["episodes"]) == 3 and episodes["frames"] == []
        assert not episodes["renderer"]["available"]
        # the offline critic: a subtask's score is the share of episodes whose term sum is above 0
        shares = {k: sum(e["sums"][k] > 0 for e in episodes["episodes"]) / 3 for k in ("approach", "goal")}
        assert state["critiques"][r.id]["scores"] == pytest.approx(shares)
        assert state["critiques"][r.id]["aggregate"] == pytest.approx(sum(shares.values()) / 2)
    best = max(run.records, key=lambda r: state["critiques"][r.id]["aggregate"])  # first on ties, as kept
    assert state["best"]["id"] == best.id and state["stage"] == "done"
    # the critic policies came from the run's kept policies: every candidate's, not only the best
    assert sorted(p.name for p in (run.run_dir / "policies").iterdir()) == [r.id for r in run.records]
    # each round-2 candidate rewrites its round-1 predecessor from that one's critique
    programs = {e["id"]: e for e in log if e["event"] == "prompt" and e.get("kind") != "text"}
    for k in (0, 1):
        child = run.store.get(f"it0005-c0{k}")
        assert list(child.parent_ids) == [f"it0001-c0{k}"]
        user = programs[child.id]["user"]
        assert f"policy trained on program it0001-c0{k} and scored" in user
        assert "must return a dict with exactly these 2 terms" in user


@pytest.mark.slow
def test_cli_run_stopped_after_a_batch_resumes_into_the_same_run_and_replays(offline_run, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [ROOT, HERE.parents[1] / "evolve"]))}
    cfg = {k: v for k, v in CONFIG.items()}
    cfg["search"] = {k: v for k, v in CONFIG["search"].items() if k not in ("strategy", "options")}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    run_dir = tmp_path / "cli"
    first = [sys.executable, "-m", "limen_jax.evolve", "--task", "toy_corridor", "--config",
             str(tmp_path / "cfg.json"), "--strategy", "rda", "--set", "search.options.iterations=2",
             "--iterations", "3", "--run-dir", str(run_dir)]
    out = subprocess.run(first, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    stopped = json.loads((run_dir / "state.json").read_text())
    assert stopped["iteration"] == 3 and stopped["strategy"]["stage"] == "reflect"  # after the first critique
    again = [sys.executable, "-m", "limen_jax.evolve", "--resume", str(run_dir), "--iterations", "8"]
    out = subprocess.run(again, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    final = json.loads((run_dir / "state.json").read_text())
    whole = json.loads((offline_run.run_dir / "state.json").read_text())
    assert final["strategy"] == whole["strategy"]
    assert brief(final["archive"]["programs"]) == brief(whole["archive"]["programs"])

    # every answer (text and programs) is in the cache: a replay is the same run
    replay = lj.evolve("toy_corridor", {**CONFIG, "llm": {"mutator": "replay", "replay_from": str(run_dir)}},
                       run_dir=tmp_path / "replay", verbose=False)
    replayed = json.loads((replay.run_dir / "state.json").read_text())
    assert replayed["strategy"] == whole["strategy"]
    assert brief(replayed["archive"]["programs"]) == brief(whole["archive"]["programs"])


PROGRAM = """\
import jax.numpy as jnp

def get_observation(state):
    return jnp.array([state.pos / 10.0, state.goal / 10.0], dtype=jnp.float32)

def compute_reward(state, action, next_state):
    closer = jnp.abs(state.pos - state.goal) - jnp.abs(next_state.pos - next_state.goal)
    return {"approach": 0.1 * closer.astype(jnp.float32),
            "goal": jnp.asarray(next_state.pos == next_state.goal, jnp.float32)}
"""


def model(body: dict) -> Reply:
    """A fake model: answers each RDA role in its format, and programs with two terms."""
    user = body["messages"][0]["content"]
    if "Split this task into the ordered subtasks" in user:
        return Reply("Two stages.\n1. approach: get closer to the goal\n2. goal: stand on the goal")
    if "score how far the policy completed the subtask" in user:
        return Reply("\n".join(f"episode {e}, {n}: {s} | seen in the logs" for e in (1, 2, 3)
                               for n, s in (("approach", 0.75), ("goal", 0.25))))
    if "Rewrite the description of each vague subtask" in user:
        return Reply("1. approach: each step ends nearer the goal\n2. goal: the agent's cell is the goal cell")
    return Reply(f"Reward progress and the goal.\n\n```python\n{PROGRAM}```\n")


@pytest.mark.slow
def test_each_role_sees_what_the_paper_gives_it_as_sent_to_the_messages_api(tmp_path, monkeypatch):
    # the fake model writes one program every time: each is trained, so that each has a critic
    config = {**CONFIG, "llm": {"mutator": "anthropic", "max_cost_usd": 5.0},
              "search": {**CONFIG["search"], "dedupe": False}}
    with FakeAnthropic(responder=model) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "llm", verbose=False)
    sent = [(r["body"]["system"], r["body"]["messages"][0]["content"]) for r in fake.requests]
    assert run.complete and len(sent) == 1 + 2 + 2 + 1 + 2 + 2
    rda_system = load_template("rda_system").strip()
    decompose, programs1, critics1, reflect, programs2, critics2 = (sent[:1], sent[1:3], sent[3:5], sent[5:6],
                                                                    sent[6:8], sent[8:10])
    # decomposition: the task's instruction, nothing else from the run
    system, user = decompose[0]
    assert system == rda_system and "1-D corridor: walk to the end marked as the goal" in user
    assert "at most 4 of them" in user and "## Subtasks" not in user
    # programs: the usual program prompt, plus the subtasks as the exact term names
    for system, user in programs1:
        assert system.startswith("You are an expert reinforcement learning engineer.")
        assert user.endswith("dict with exactly these 2 terms, one per subtask, named as given (weight each inside "
                             "its term):\n\n1. approach: get closer to the goal\n2. goal: stand on the goal\n")
    # critic: exactly 3 episodes' per-term logs, the renderer line, the candidate's reward code
    for (system, user), rid in zip(critics1, ("it0001-c00", "it0001-c01"), strict=True):
        assert system == rda_system and user.count("### Episode ") == 3
        assert "term sums: approach " in user and "\nstep approach goal\n0 " in user
        assert "Frames: none attached; the task has no renderer here" in user and user.count("logs only") == 1
        assert "\"approach\": 0.1 * closer" in user and run.store.get(rid).code.strip().splitlines()[-1] in user
    # reflection: each subtask with the round's mean completion, the same names and count asked back
    system, user = reflect[0]
    assert system == rda_system
    assert "1. approach: get closer to the goal\n   mean completion 0.75" in user
    assert "2. goal: stand on the goal\n   mean completion 0.25; failing: seen in the logs" in user
    assert "Keep exactly these 2 subtasks" in user
    # round 2: the sharpened subtasks and each predecessor's critique
    for (_, user), k in zip(programs2, (0, 1), strict=True):
        assert "1. approach: each step ends nearer the goal\n2. goal: the agent's cell is the goal cell" in user
        assert f"policy trained on program it0001-c0{k} and scored" in user
        assert "- approach: 0.75\n- goal: 0.25 (failing: seen in the logs)" in user
    assert all(u.count("### Episode ") == 3 for _, u in critics2)
    state = json.loads((run.run_dir / "state.json").read_text())["strategy"]
    assert state["best"] == {"id": "it0001-c00", "aggregate": 0.5, "round": 0}  # ties keep the first


class Recording(OfflineAuthor):
    """The offline stand-in, keeping the images of every prompt its answers go with."""

    name = "recording"

    def __init__(self, catalog) -> None:
        super().__init__(catalog)
        self.images = []

    def answering(self, text):
        plain = super().answering(text)
        recording = self

        class Delivery:
            name = recording.name

            def complete(self, system, user, images=(), seed=0):
                recording.images.append(tuple(images))
                return plain.complete(system, user, images, seed)

        return Delivery()


@pytest.mark.slow
def test_on_xland_the_critic_gets_the_rendered_frames_its_prompt_lists(tmp_path):
    from limen_jax.task import make

    mutator = Recording(make("xland_easy").offline_catalog())
    config = {"seed": 3, "cascade": {"full_steps": 20_000},
              "search": {"iterations": 3, "candidates": 1, "strategy": "rda", "options": {"iterations": 1}}}
    run = lj.evolve("xland_easy", config, run_dir=tmp_path / "x", mutator=mutator, verbose=False)
    assert run.complete and [r.id for r in run.records] == ["it0001-c00"]
    log = run.records[0].evaluations["episodes"]
    assert log["renderer"]["available"] and len(log["frames"]) == 20
    lengths = [e["length"] for e in log["episodes"]]
    # 7 + 7 + 6 frames from each episode's start state to its last (fewer where it is shorter)
    assert [f["episode"] for f in log["frames"]] == sorted(f["episode"] for f in log["frames"])
    assert all(f["step"] <= lengths[f["episode"]] for f in log["frames"])
    assert [f["step"] for f in log["frames"] if f["episode"] == 0][::6] == [0, lengths[0]]
    (critic,) = [images for images in mutator.images if images]  # the one critic prompt shows frames
    assert critic == tuple(f["png"] for f in log["frames"])
    png = Image.open(io.BytesIO(base64.b64decode(critic.images[0])))
    assert png.format == "PNG" and png.size == (288, 288)  # the whole 9 x 9 room, 32 px tiles
    first = ", ".join(str(f["step"]) for f in log["frames"] if f["episode"] == 0)
    assert f"Frames: 20 rendered frames are attached, in this order: episode 1 at steps {first}; " in critic.user
    assert critic.user.count("### Episode ") == 3 and "logs only" not in critic.user
    # the critic read every step's terms; the event log got a summary of a few hundred bytes
    assert f"\nstep {' '.join(log['terms'])}\n0 " in critic.user
    (logged,) = [line for line in (run.run_dir / "events.jsonl").read_text().splitlines()
                 if '"event": "evaluation"' in line and '"kind": "episodes"' in line]
    assert len(logged) < 4_000 < len(json.dumps(log))
    assert json.loads(logged)["frames"] == 20 and "steps" not in json.loads(logged)["episodes"][0]


# cheap: decompose, programs (2 candidates), episodes, critic; 1,024 steps x 1 seed, no cascade
CHEAP = toy_config(search={"iterations": 3, "candidates": 2, "seeds": 1, "strategy": "rda",
                           "options": {"iterations": 1}}, cascade={"short_steps": 0, "full_steps": 1024})


def test_cli_run_killed_with_9_while_the_critics_episodes_roll_out_resumes_to_the_same_run(tmp_path):
    whole = lj.evolve("toy_corridor", CHEAP, run_dir=tmp_path / "whole", verbose=False)
    state = checkpoint(whole.run_dir)["strategy"]
    assert whole.complete and state["stage"] == "done" and state["best"]["id"].startswith("it0001-c0")
    assert [r.id for r in whole.records] == ["it0001-c00", "it0001-c01"]
    assert all(len(r.evaluations["episodes"]["episodes"]) == 3 for r in whole.records)
    run_dir = tmp_path / "cli"
    config = {**CHEAP, "search": {k: v for k, v in CHEAP["search"].items() if k not in ("strategy", "options")}}
    # killed in the episodes batch, after its job started: the checkpoint is the trained
    # candidates', their policies kept on disk; the resumed run rolls them out again
    killed = kill_and_resume(run_dir, config, logged("evaluate", "it0002-e"),
                             ["--strategy", "rda", "--set", "search.options.iterations=1"])
    assert killed["iteration"] == 1 and killed["strategy"]["stage"] == "episodes"
    assert killed["strategy"]["candidates"] == ["it0001-c00", "it0001-c01"]
    assert all("episodes" not in p["evaluations"] for p in killed["archive"]["programs"])
    assert checkpoint(run_dir)["strategy"] == checkpoint(whole.run_dir)["strategy"]
    assert_same_programs(run_dir, whole.records,
                         lambda r: (r.code, r.parent_ids, r.success_per_seed, r.evaluations))
