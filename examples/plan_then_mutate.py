"""A search strategy written outside limen_jax: plan once, mutate the best, retrain each new best.

Batch 0 asks for a plan (text); every later batch asks for ``k`` programs that improve the
best so far (from scratch while there is none), with the plan in the prompt; when a batch
finds a new best, the next one also retrains it on fresh seeds. The plan and the retrained
ids are its memory, saved in the checkpoint, so ``--resume`` continues it; offline, it writes
its own plan. Run it with ``lj.evolve(task, strategy=PlanThenMutate())`` or register it by
entry point (docs/howto/write-a-strategy.md).
"""

from __future__ import annotations

import dataclasses

from limen_jax.search import StrategyBase, ask_program, ask_text, evaluate


class PlanThenMutate(StrategyBase):
    name = "plan_then_mutate"
    lookahead = 0  # reads every outcome before it proposes again

    @dataclasses.dataclass(frozen=True)
    class Options:
        k: int = 2  # programs per batch
        retrain_seeds: int = 2  # fresh seeds for each new best
        target: float = 1.0  # stop once the best succeeds this often

    def __init__(self, options: Options | None = None) -> None:
        super().__init__(options)
        self.plan, self.retrained = "", []

    def propose(self, view, rng):
        if view.iteration == 0:
            user = f"{view.task.description}\n\nList three reward ideas for this task, one per line."
            return [ask_text(view, rng, 0, "plan", system="You design RL rewards.", user=user)]
        best = view.store.best()
        out = []
        for k in range(self.options.k):
            req = ask_program(view, rng, k, 0, parent=best, top=view.store.top_k(2) if best else [])
            out.append(dataclasses.replace(req, user=f"{req.user}\n## A plan to draw on\n{self.plan}\n"))
        if best is not None and best.id not in self.retrained:
            out.append(evaluate(view, 0, [best], "retrain", seeds=self.options.retrain_seeds))
        return out

    def tell(self, view, outcomes):
        for o in outcomes:
            if o.request.kind == "text" and o.text:
                self.plan = o.text
            elif o.request.kind == "eval":
                self.retrained += [r.id for r in o.records]
        return [{"event": "plan_then_mutate", "retrained": list(self.retrained)}]

    def offline_text(self, request):  # no LLM: three catalog terms, drawn from the request's Generator
        names = request.author.draw(request.rng, [t.name for t in request.author.catalog.terms], 3, "t")
        return "Offline plan:\n" + "\n".join(f"{i + 1}. reward term `{n}`" for i, n in enumerate(names))

    def to_dict(self):
        return {"plan": self.plan, "retrained": self.retrained}

    def load(self, state):
        self.plan, self.retrained = state["plan"], list(state["retrained"])

    def done(self, view):
        best = view.store.best()
        return f"best success {best.success:.2f}" if best and best.success >= self.options.target else None
