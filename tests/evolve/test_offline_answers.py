"""A strategy written outside the library answers its own text role and its own program
operator offline (``offline_text`` / ``offline_program``): the offline stand-in knows only
the generic operators, so no word of the strategy's needs to be known to limen_jax.llm."""

from __future__ import annotations

import dataclasses
import json

from test_evolve import toy_config

import limen_jax as lj
from limen_jax.llm.offline import read_genome
from limen_jax.search import StrategyBase, ask_program, ask_text


class Riddler(StrategyBase):
    """Asks a riddle (text), then a program whose prompt holds the answer, and a program of
    its own operator ("twist")."""

    name = "riddler"
    lookahead = 0

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.answer = ""

    def propose(self, view, rng):
        if view.iteration == 0:
            return [ask_text(view, rng, 0, "riddle", system="You answer riddles.", user="What has keys but no locks?")]
        plain = ask_program(view, rng, 0, 0, parent=None)
        twist = ask_program(view, rng, 1, 0, parent=None, operator="twist")
        return [dataclasses.replace(r, user=f"{r.user}\n## The riddle's answer\n{self.answer}\n")
                for r in (plain, twist)]

    def tell(self, view, outcomes):
        for o in outcomes:
            if o.request.kind == "text":
                self.answer = o.text
        return []

    def to_dict(self):
        return {"answer": self.answer}

    def load(self, state):
        self.answer = state["answer"]

    def offline_text(self, request):
        assert request.request.role == "riddle"
        return f"A piano ({len(request.author.catalog.terms)} catalog terms)."

    def offline_program(self, request):
        if request.request.operator != "twist":
            return None
        cat = request.author.catalog
        genome = {"features": list(cat.required_features) or [cat.features[0].name],
                  "terms": {t: cat.term(t).weight for t in (*cat.required_terms, *cat.dense_terms[:1])}}
        return request.author.edit(genome, ["twist"], request.mode)


def test_an_outside_strategy_answers_its_own_role_and_operator_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = toy_config(search={"iterations": 1, "candidates": 2, "seeds": 1})
    run = lj.evolve("toy_corridor", config, run_dir=tmp_path / "r", strategy=Riddler(), verbose=False)
    assert run.complete
    events = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
    answers = [e for e in events if e["event"] == "response" and e["id"] == "it0000-t00"]
    said = "A piano (3 catalog terms)."
    assert [(a["text"], a["model"], a["mutator"]) for a in answers] == [(said, "offline", "offline")]
    prompts = [e for e in events if e["event"] == "prompt" and e["iteration"] == 1]
    assert [e["operator"] for e in prompts] == ["from_scratch", "twist"]
    assert all(e["user"].endswith(f"## The riddle's answer\n{said}\n") for e in prompts)
    generic, twist = sorted(run.records, key=lambda r: r.id)
    assert generic.thought.startswith("Offline edit (from_scratch") and twist.thought == "Offline edit (twist)."
    assert read_genome(twist.code) == {"features": ["pos"], "terms": {"goal": 1.0, "approach": 0.1}}

    # the strategy's own answers are recorded like any model's: a replay asks no strategy
    replay = {**config, "llm": {"mutator": "replay", "replay_from": str(run.run_dir)}}
    again = lj.evolve("toy_corridor", replay, run_dir=tmp_path / "again", strategy=Riddler(), verbose=False)
    assert [(r.id, r.code, r.success_per_seed) for r in again.records] == [
        (r.id, r.code, r.success_per_seed) for r in run.records]
