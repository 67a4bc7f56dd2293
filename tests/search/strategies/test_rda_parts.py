"""The rda strategy's parts on tiny inputs, with hand-computed values: parsing the
decomposition, the critic and the reflection; the critic's prompt (exactly its episodes,
the renderer line); the offline answers; frames picked per episode; images through the
Messages API and the replay key."""

from __future__ import annotations

import base64
import dataclasses
import json

import numpy as np
import pytest
from fake_anthropic import FakeAnthropic, Reply
from offline_answers import answer as offline
from offline_answers import text_request
from toy_task import ToyCorridor

from limen_jax.archive import ProgramRecord
from limen_jax.llm.anthropic_client import AnthropicClient
from limen_jax.llm.replay import ResponseCache
from limen_jax.search.evaluation.episodes import Episodes, frame_steps
from limen_jax.search.strategies import rda_text as text
from limen_jax.search.strategies.rda import Decompose

CATALOG = ToyCorridor().offline_catalog()


def test_subtasks_are_read_from_numbered_lines_only():
    answer = ("Here is my plan: first explore.\n"
              "1. **reach_door**: walk to the yellow door\n"
              "2) `open_door` - toggle it open\n"
              "- note: not a subtask\n"
              "3. Reach_Door: a duplicate name\n"
              "4. pick_key \u2014 pick up the key ```rm``` now\n"
              "5. goal: drop it by the box\n")
    assert text.parse_subtasks(answer, 3) == [
        {"name": "reach_door", "description": "walk to the yellow door"},
        {"name": "open_door", "description": "toggle it open"},
        {"name": "pick_key", "description": "pick up the key '''rm''' now"},
    ]
    assert text.parse_subtasks("no list at all", 4) == []


def test_reflection_keeps_the_names_order_and_count():
    subtasks = [{"name": "approach", "description": "get close"}, {"name": "goal", "description": "finish"}]
    answer = "1. goal: stand on the goal cell\n2. extra: a new one\n3. approach: within 1 cell of the goal\n"
    assert text.reflect(subtasks, answer) == [{"name": "approach", "description": "within 1 cell of the goal"},
                                              {"name": "goal", "description": "stand on the goal cell"}]
    assert text.reflect(subtasks, "") == subtasks


def test_the_critic_is_parsed_and_aggregated_per_subtask():
    answer = ("Episode 1, approach: 0.5 | halfway there\n"
              "episode 1, goal: 0 | never reached\n"
              "episode 2, approach: 1.7 | clipped to 1\n"
              "episode 2, approach: 0.1 | a second line for the pair is ignored\n"
              "episode 4, goal: 1 | no such episode\n"
              "episode 3, goal: 1 | reached\n")
    scores, reasons = text.parse_critic(answer, ["approach", "goal"], 3)
    assert scores.tolist() == [[0.5, 0.0], [1.0, 0.0], [0.0, 1.0]]
    assert reasons[2][0] == "not scored" and reasons[1][0] == "clipped to 1"
    summary = text.summary(["approach", "goal"], scores, reasons)
    assert summary["scores"] == {"approach": pytest.approx(0.5), "goal": pytest.approx(1 / 3)}
    assert summary["aggregate"] == pytest.approx((0.5 + 1 / 3) / 2)
    assert summary["failing"] == {"approach": ["not scored"], "goal": ["never reached", "not scored"]}


def log_of(sums, *, frames=(), renderer=None):
    """An ``episodes`` log with one episode per entry of ``sums`` ({term: per-step values})."""
    episodes = [{"success": False, "length": len(next(iter(s.values()))), "return": sum(map(sum, s.values())),
                 "sums": {k: sum(v) for k, v in s.items()}, "steps": s} for s in sums]
    return {"policy_seed": 0, "rollout_seed": 700, "terms": sorted(sums[0]), "episodes": episodes,
            "renderer": renderer or {"available": False, "note": "task 'toy_corridor' does not render frames"},
            "frames": list(frames)}


SUMS = [{"approach": [0.1, 0.1], "goal": [0.0, 1.0]}, {"approach": [-0.1, 0.0], "goal": [0.0, 0.0]},
        {"approach": [0.0, 0.0], "goal": [0.0, 1.0]}]


def test_the_offline_critic_scores_the_share_of_episodes_whose_term_sum_passes():
    record = ProgramRecord("it0001-c00", "", evaluations={"episodes": log_of(SUMS)})
    answer = offline(Decompose(), text_request("critic", context=[record]), CATALOG, others=[record])
    scores, _ = text.parse_critic(answer, ["approach", "goal"], 3)
    # approach sums 0.2, -0.1, 0 -> only episode 1 passes 0; goal sums 1, 0, 1 -> episodes 1 and 3
    assert scores.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 1.0]]
    assert text.summary(["approach", "goal"], scores, [["r"] * 2] * 3)["scores"] == {
        "approach": pytest.approx(1 / 3), "goal": pytest.approx(2 / 3)}


def test_the_offline_decomposition_is_the_catalogs_dense_then_required_terms_and_reflection_keeps_them():
    ask = lambda role: offline(Decompose(), text_request(role, 3), CATALOG)  # noqa: E731
    subtasks = text.parse_subtasks(ask("decompose"), 4)
    assert [s["name"] for s in subtasks] == ["approach", "goal"]
    sharpened = text.reflect(subtasks, ask("reflect_subtasks"))
    assert [s["name"] for s in sharpened] == ["approach", "goal"]
    assert sharpened[1]["description"].endswith("done in an episode when `goal` sums above 0")


def test_the_critic_prompt_holds_exactly_its_three_episodes_and_the_renderer_line():
    record = ProgramRecord("it0001-c00", "def compute_reward(state, action, next_state):\n    return 1.0\n")
    subtasks = [{"name": "approach", "description": "get close"}, {"name": "goal", "description": "finish"}]
    prompt = text.critic_prompt(ToyCorridor(), subtasks, record, log_of(SUMS), 150)
    assert prompt.count("### Episode ") == 3 and "### Episode 3: no success, 2 steps, return 1\n" in prompt
    assert "term sums: approach 0.2, goal 1\nstep approach goal\n0 0.1 0\n1 0.1 1" in prompt
    assert ("Frames: none attached; the task has no renderer here (task 'toy_corridor' does not render "
            "frames): logs only.") in prompt
    assert "1. approach: get close\n2. goal: finish" in prompt and "    return 1.0\n---END REWARD CODE---" in prompt
    frames = [{"episode": 0, "step": 0, "png": "x"}, {"episode": 0, "step": 2, "png": "y"},
              {"episode": 2, "step": 1, "png": "z"}]
    shown = text.critic_prompt(ToyCorridor(), subtasks, record,
                               log_of(SUMS, frames=frames, renderer={"available": True, "note": ""}), 150)
    assert ("Frames: 3 rendered frames are attached, in this order: episode 1 at steps 0, 2; episode 3 at steps 1 "
            "(the frame at step t shows the state before step t; at the episode's length, its final state).") in shown


def test_a_rewards_terms_are_matched_against_the_subtasks_by_name():
    subtasks = [{"name": "approach", "description": "get close"}, {"name": "goal", "description": "finish"}]
    assert text.term_mismatch(subtasks, ["approach", "goal"]) == ([], [])
    assert text.term_mismatch(subtasks, ["bonus", "goal", "time"]) == (["approach"], ["bonus", "time"])
    assert text.mismatch_text(subtasks, ["goal", "approach"]) == ""  # order does not matter
    assert text.mismatch_text(subtasks, ["bonus", "goal", "time"]) == (
        "no term for subtask `approach`; the terms `bonus`, `time` are named after no subtask")
    assert text.mismatch_text(subtasks, ["approach"]) == "no term for subtask `goal`"
    assert text.mismatch_text(subtasks, ["reward"]) == (
        "it returns a single value (logged as `reward`), with no term for subtasks `approach`, `goal`")
    assert text.critic_terms_note(subtasks, ["approach", "goal"]) == ""
    assert text.rewrite_terms_section("it0001-c00", subtasks, ["goal", "approach"]) == ""


def test_the_critic_is_told_which_terms_are_missing_or_unexpected_and_a_match_changes_nothing():
    record = ProgramRecord("it0001-c00", "def compute_reward(state, action, next_state):\n    return 1.0\n")
    subtasks = [{"name": "approach", "description": "get close"}, {"name": "goal", "description": "finish"}]
    matched = text.critic_prompt(ToyCorridor(), subtasks, record, log_of(SUMS), 150)
    assert "Terms:" not in matched and "logs only.\n\n---BEGIN REWARD CODE---" in matched
    odd = [{"bonus" if k == "approach" else k: v for k, v in sums.items()} for sums in SUMS]  # approach renamed
    told = text.critic_prompt(ToyCorridor(), subtasks, record, log_of(odd), 150)
    assert ("logs only.\n\nTerms: this reward's terms are not the subtasks: no term for subtask `approach`; the "
            "term `bonus` is named after no subtask. The logs show the terms it has; judge a subtask without a term "
            "of its own from the outcomes and the other terms (and the frames, where attached), and still score "
            "every subtask.\n\n---BEGIN REWARD CODE---") in told
    # the line is all that is added: the rest is the matched prompt with the term renamed
    assert told.replace(told[told.index("Terms:"):told.index("---BEGIN")], "") == \
        matched.replace("approach", "bonus").replace("1. bonus: get close", "1. approach: get close")


def test_the_logged_summary_keeps_outcomes_and_sums_and_drops_steps_and_frames():
    frames = [{"episode": 0, "step": t, "png": "A" * 3000} for t in range(20)]
    log = log_of([{"approach": [0.1] * 500, "goal": [0.0] * 499 + [1.0]}] * 3, frames=frames)
    assert len(json.dumps(log)) > 60_000
    brief = Episodes().summary(log)
    assert len(json.dumps(brief)) < 1_000
    assert brief["frames"] == 20 and brief["terms"] == ["approach", "goal"]
    assert brief["episodes"][2] == {"success": False, "length": 500, "return": pytest.approx(51.0),
                                    "sums": {"approach": pytest.approx(50.0), "goal": 1.0}}
    assert Episodes().summary({"error": "no kept policy"}) == {"error": "no kept policy"}
    assert log["episodes"][0]["steps"]["goal"][-1] == 1.0 and len(log["frames"]) == 20  # the record's log is whole


def test_frames_spread_over_the_episodes_and_their_states():
    # 20 frames over 3 episodes: 7, 7, 6; an episode of 3 steps has only 4 states
    assert frame_steps([12, 3, 5], 20) == ([(0, t) for t in (0, 2, 4, 6, 8, 10, 12)] + [(1, t) for t in (0, 1, 2, 3)]
                                           + [(2, t) for t in (0, 1, 2, 3, 4, 5)])
    assert frame_steps([4, 4], 1) == [(0, 0)]
    assert frame_steps([4, 4], 0) == []


def test_images_go_to_the_messages_api_as_blocks_and_into_the_replay_key(tmp_path):
    png = base64.b64encode(b"\x89PNG fake").decode()
    with FakeAnthropic([Reply("episode 1, goal: 1 | ok")]) as fake:
        client = AnthropicClient(api_key="k", base_url=fake.url, timeout=5.0)
        assert client.complete("sys", "look", (png, png)).text == "episode 1, goal: 1 | ok"
        content = fake.requests[0]["body"]["messages"][0]["content"]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    assert content == [image, image, {"type": "text", "text": "look"}]
    cache = ResponseCache(tmp_path / "c.jsonl")
    assert cache.next_key("sys", "look", (png, png), 0)[0] != ResponseCache(tmp_path / "d.jsonl").next_key(
        "sys", "look", (), 0)[0]


def test_the_strategy_memory_round_trips_through_json_and_rejects_an_unknown_stage():
    strategy = Decompose(Decompose.Options(iterations=2))
    strategy.stage, strategy.round, strategy.subtasks = "critic", 1, [{"name": "goal", "description": "finish"}]
    strategy.candidates, strategy.best = ["it0005-c00"], {"id": "it0001-c00", "aggregate": 0.5, "round": 0}
    strategy.critiques = {"it0001-c00": text.summary(["goal"], np.array([[0.5]]), [["half"]])}
    again = Decompose(Decompose.Options(iterations=2))
    again.load(json.loads(json.dumps(strategy.to_dict())))
    assert again.to_dict() == strategy.to_dict()
    with pytest.raises(ValueError, match="unknown stage"):
        again.load({**strategy.to_dict(), "stage": "bogus"})
    # a run directory may come from anyone: the other fields are typed on loading too
    for field, value in [("best", "zzz"), ("best", {"id": "it0001-c00", "aggregate": float("nan"), "round": 0}),
                         ("candidates", ["it0005-c00", 5]), ("subtasks", [{"name": 1, "description": "d"}]),
                         ("critiques", {"it0001-c00": "x"})]:
        with pytest.raises(ValueError, match=f"rda: {field} in the checkpoint"):
            again.load({**strategy.to_dict(), field: value})
    with pytest.raises(ValueError, match="max_subtasks"):
        Decompose.Options(max_subtasks=9)


def test_the_stage_machine_skips_what_has_nothing_to_judge_and_ends_after_its_iterations():
    from limen_jax.archive import Archive, ArchiveConfig
    from limen_jax.search import SearchView
    from limen_jax.search.requests import Outcome

    archive = Archive(ArchiveConfig(num_islands=1))
    strategy = Decompose(Decompose.Options(iterations=2))
    view = lambda it: SearchView(archive, ToyCorridor(), "full", it, 2)  # noqa: E731
    rng = np.random.default_rng(0)

    (ask,) = strategy.propose(view(0), rng)
    assert (ask.kind, ask.role, ask.system) == ("text", "decompose", text.system())
    strategy.tell(view(0), [Outcome(ask, text="1. near: be near\n2. goal: be there")])
    first = strategy.propose(view(1), rng)
    assert [(r.kind, r.operator, r.parent_ids) for r in first] == [("program", "rda_initial", ())] * 2
    assert first[0].user.endswith("exactly these 2 terms, one per subtask, named as given (weight each inside its "
                                  "term):\n\n1. near: be near\n2. goal: be there\n")
    broken = ProgramRecord(first[0].id, "x", error={"stage": "check", "message": "no compute_reward"})
    trained = ProgramRecord(first[1].id, "y", success=0.5, success_per_seed=[0.5], stage="full")
    for record in (broken, trained):
        archive.store.add(record)
    strategy.tell(view(1), [Outcome(first[0], broken), Outcome(first[1], trained)])
    assert strategy.critiques == {broken.id: {"note": "not trained: no compute_reward"}}
    (rollout,) = strategy.propose(view(2), rng)
    assert (rollout.kind, rollout.program_ids, rollout.options) == ("eval", (trained.id,), {"episodes": 3,
                                                                                          "frames": 20})
    trained.evaluations["episodes"] = {"error": "FileNotFoundError: no kept policy"}
    strategy.tell(view(2), [Outcome(rollout, records=(trained,))])
    # no episodes to criticise: no critic and no reflection; the next round rewrites what it can
    assert (strategy.stage, strategy.round) == ("programs", 1)
    second = strategy.propose(view(3), rng)
    assert [(r.operator, r.parent_ids) for r in second] == [("rda_initial", ()), ("rda_rewrite", (trained.id,))]
    assert f"#### Program {broken.id} failed at stage \"check\"" in second[0].user  # shown to its successor
    gone = [ProgramRecord(r.id, "z", error={"stage": "check", "message": "bad"}) for r in second]
    for record in gone:
        archive.store.add(record)
    strategy.tell(view(3), [Outcome(r, g) for r, g in zip(second, gone, strict=True)])
    assert strategy.stage == "done" and strategy.propose(view(4), rng) == []
    assert strategy.done(view(4)) == "rda: 2 iterations; no critique"


def test_the_renderer_note_the_critic_reads_names_no_host_path():
    from limen_jax.search.evaluation.episodes import renderer

    class NoGL(ToyCorridor):
        def render(self, sim):
            raise NotImplementedError("MuJoCo offscreen rendering needs an OpenGL backend: "
                                      "/usr/lib/x86_64-linux-gnu/libEGL.so.1: cannot open shared object file")

    view = renderer(NoGL())
    assert view == {"available": False, "note": "MuJoCo offscreen rendering needs an OpenGL backend: <jax>: cannot "
                                                "open shared object file"}
    assert "/usr/lib" not in text.renderer_line({"renderer": view})


def test_an_episodes_job_carries_the_kept_policy_not_its_path_and_says_why_one_is_missing(tmp_path):
    import pickle

    from limen_jax.interface import default_interface, placeholder_interface
    from limen_jax.policies import policy_dir, save_policy
    from limen_jax.rl import PPOConfig
    from limen_jax.rl.normalize import ObsStats
    from limen_jax.search.evaluation.jobs import Budget
    from limen_jax.search.evaluation.kind_registry import JobContext, evaluation_kind
    from limen_jax.search.evaluation.remote import job_from_wire, job_to_wire

    task = ToyCorridor()

    def params(k):
        return {"params": {"Dense_0": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3) * k,
                                       "bias": np.full(3, k, np.float32)}}}

    stats = ObsStats(np.array([0.5, -1.0], np.float32), np.array([2.0, 3.0], np.float32), np.float32(7.0))
    for seed in (3000, 3001):  # the first kept seed travels
        meta = {"seed": seed, "task": "toy", "obs_dim": 2}
        save_policy(policy_dir(tmp_path, "it0001-c00", seed), params(seed), stats, meta)
    (tmp_path / "policies" / "it0001-c01" / "seed3000").mkdir(parents=True)  # kept, but no checkpoint in it
    kept, damaged = (dataclasses.replace(placeholder_interface(2), name=f"it0001-c0{k}") for k in (0, 1))
    ctx = JobContext(task, PPOConfig(), 3, 2, Budget(0, 2048, 0.0), run_path=str(tmp_path))
    job = evaluation_kind("episodes").job(ctx, [kept, damaged, default_interface(task)], {"frames": 4})
    assert job.kind == "episodes" and list(job.seeds) == [3700]
    assert job.options == {"episodes": 3, "frames": 4}
    first, bad, none = job.data["policies"]
    assert first["metadata"] == {"seed": 3000, "task": "toy", "obs_dim": 2}
    np.testing.assert_array_equal(first["arrays"]["params"]["params"]["Dense_0"]["kernel"],
                                  params(3000)["params"]["Dense_0"]["kernel"])
    np.testing.assert_array_equal(first["arrays"]["obs_stats"]["var"], stats.var)
    assert bad["unreadable"] == ("the kept policy of it0001-c01 (seed 3000) could not be read: "
                                 "FileNotFoundError: no saved policy in <jax>")  # the path scrubbed
    assert "--keep-policies all" in none["missing"]
    # what travels names no path of the driver's, and a worker rebuilds the same policy from it
    wire = pickle.dumps(job_to_wire(dataclasses.replace(job, interfaces=[default_interface(task)] * 3)))
    assert str(tmp_path).encode() not in wire and b"/policies/" not in wire
    back = job_from_wire(pickle.loads(wire), task)
    assert back.options == job.options and back.kind == "episodes"
    from limen_jax.search.evaluation.episodes import policy_from_data

    policy = policy_from_data(back.data["policies"][0])
    assert policy.metadata["seed"] == 3000 and float(policy.obs_stats.count) == 7.0
    np.testing.assert_array_equal(policy.params["params"]["Dense_0"]["bias"], np.full(3, 3000, np.float32))
    unreadable, missing = evaluation_kind("episodes").run(dataclasses.replace(
        back, interfaces=[default_interface(task)] * 2, data={"policies": [bad, none]}), None).results
    assert isinstance(unreadable, RuntimeError) and str(unreadable) == bad["unreadable"]
    assert isinstance(missing, FileNotFoundError) and "--keep-policies all" in str(missing)
    # a rollout's error reaches the record (and the critic's note) with host paths scrubbed
    record = ProgramRecord("it0001-c00", "x")
    Episodes().score(record, ValueError(f"bad shape in {tmp_path}/policies/x/arrays"), job)
    assert record.evaluations["episodes"] == {"error": "ValueError: bad shape in <jax>"}


def test_a_candidate_whose_terms_are_not_the_subtasks_is_kept_logged_and_named_to_its_rewrite():
    from limen_jax.archive import Archive, ArchiveConfig
    from limen_jax.search import SearchView
    from limen_jax.search.requests import Outcome

    archive = Archive(ArchiveConfig(num_islands=1))
    strategy = Decompose(Decompose.Options(iterations=2))
    view = lambda it: SearchView(archive, ToyCorridor(), "full", it, 2)  # noqa: E731
    rng = np.random.default_rng(0)
    (ask,) = strategy.propose(view(0), rng)
    strategy.tell(view(0), [Outcome(ask, text="1. near: be near\n2. goal: be there")])
    first = strategy.propose(view(1), rng)
    terms = [{"near": 0.5, "goal": 1.0}, {"goal": 1.0, "bonus": 2.0}]  # the second has no `near`, an extra `bonus`
    records = [ProgramRecord(r.id, f"# {k}", success=0.5, success_per_seed=[0.5], stage="full", eval_terms=t)
               for k, (r, t) in enumerate(zip(first, terms, strict=True))]
    for record in records:
        archive.store.add(record)
    (event,) = strategy.tell(view(1), [Outcome(r, rec) for r, rec in zip(first, records, strict=True)])
    odd = records[1].id
    assert event["trained"] == [r.id for r in records]  # not rejected for it
    assert event["terms_mismatch"] == {odd: {"missing": ["near"], "unexpected": ["bonus"]}}
    (rollout,) = strategy.propose(view(2), rng)
    assert rollout.program_ids == tuple(r.id for r in records)
    for record, t in zip(records, terms, strict=True):
        record.evaluations["episodes"] = log_of([{k: [v] for k, v in t.items()}] * 3)
    strategy.tell(view(2), [Outcome(rollout, records=tuple(records))])
    critics = strategy.propose(view(3), rng)
    assert ["Terms:" in c.user for c in critics] == [False, True]
    assert "no term for subtask `near`; the term `bonus` is named after no subtask." in critics[1].user
    answer = "\n".join(f"episode {e}, {n}: 0.5 | ok" for e in (1, 2, 3) for n in ("near", "goal"))
    strategy.tell(view(3), [Outcome(c, text=answer) for c in critics])
    (reflect,) = strategy.propose(view(4), rng)
    strategy.tell(view(4), [Outcome(reflect, text="")])
    second = strategy.propose(view(5), rng)
    assert [r.parent_ids for r in second] == [(records[0].id,), (odd,)]
    assert "## Terms and subtasks" not in second[0].user
    assert second[1].user.endswith(
        f"## Terms and subtasks\n\nThe reward of program {odd} does not have one term per subtask: no term for "
        "subtask `near`; the term `bonus` is named after no subtask. Give each of the 2 subtasks a term of its own, "
        "named as the subtask, so that its completion can be read from its term.\n")
