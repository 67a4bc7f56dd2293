# %% [markdown]
# # limen_jax in a notebook
#
# A small interface search on XLand-MiniGrid *easy* through the Python API, with the
# offline mutator (no API key needed; set `ANTHROPIC_API_KEY` and `"mutator": "anthropic"`
# to use Claude). Open this file as a notebook (VS Code / Jupytext "percent" format) or
# run it as a script: `python examples/evolve_in_a_notebook.py` (a few minutes on 2 cores).

# %%
import limen_jax as lj

run = lj.evolve(
    "xland_easy",
    {
        "search": {"iterations": 2, "candidates": 2, "seeds": 2},
        "cascade": {"short_steps": 30_000, "full_steps": 100_000},
        "llm": {"mutator": "offline"},
    },
    run_dir="runs/notebook-xland-easy",
)
print(run.summary())

# %% [markdown]
# Every candidate with its scores; rejected ones carry the checker's reason.

# %%
for r in run.records:
    verdict = f"{r.success:.2f}" if r.success is not None else f"rejected ({r.error['stage']})"
    print(f"{r.id}  obs_dim={r.obs_dim}  reward_ast={r.reward_ast_size}  success={verdict}")

# %% [markdown]
# The best program, and the search as a figure (each candidate a dot, the running best a line).

# %%
print(run.best.code)
fig = run.plot("runs/notebook-xland-easy/progress_notebook.png")

# %% [markdown]
# The archive: best success per (observation size, reward AST size) cell.

# %%
print(run.archive.heatmap())
