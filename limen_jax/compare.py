"""Runs side by side: ``python -m limen_jax.compare RUN_DIR [RUN_DIR ...] [--plot FILE]``.

For ablations (``--mode full | obs_only | reward_only | sparse | independent``) and
strategy comparisons on the same task and budget: one markdown table (mode, strategy,
the mutator that actually ran, budget, programs, rejected, first-generation best, best
with its seeds, LLM calls with failed calls and retries, tokens, spend) and, with
``--plot``, every run's best success so far over iterations on one
figure. Reads the run directories only (config.json, state.json); nothing is retrained.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """The summary of one run directory: its config, its program records, its spend."""
    path = Path(run_dir)
    config = json.loads((path / "config.json").read_text())
    state = json.loads((path / "state.json").read_text())
    return {
        "name": path.name,
        "config": config,
        "records": state["archive"]["programs"],
        "spend_usd": float(state.get("spend_usd", 0.0)),
        # the run's ledger (runs older than the ledger have none)
        "usage": state.get("usage") or {},
    }


def _mutator(run: dict[str, Any]) -> str:
    """The mutator that ran ("auto" resolved), from the ledger or, failing that, the records."""
    if run["config"]["search"]["mode"] == "sparse":
        return "-"
    ran = run["usage"].get("mutator") or next(
        (r["metadata"]["mutator"] for r in run["records"] if r.get("metadata", {}).get("mutator")), None)
    return str(ran or run["config"]["llm"]["mutator"])


def _calls(usage: dict[str, Any]) -> tuple[str, str]:
    if not usage or "calls" not in usage:
        return "-", "-"
    calls = f"{usage['calls']} ({usage['failed_calls']} failed, {usage['retries']} retries)"
    return calls, f"{usage['input_tokens']:,} / {usage['output_tokens']:,}"


def _best(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    scored = [r for r in records if r.get("success") is not None]
    return max(scored, key=lambda r: r["success"]) if scored else None


def table(runs: Sequence[dict[str, Any]]) -> str:
    """A markdown table, one row per run (see the module docstring for the columns)."""
    columns = ["run", "task", "mode", "strategy", "mutator", "steps x seeds", "programs", "rejected", "first gen",
               "best (seeds)", "LLM calls", "tokens in / out", "spend"]  # fmt: skip
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for run in runs:
        cfg, records = run["config"], run["records"]
        best, first = _best(records), _best([r for r in records if r["iteration"] == 0])
        rejected = sum(r.get("success") is None for r in records)
        seeds = ", ".join(f"{s:.2f}" for s in best["success_per_seed"]) if best else ""
        cells = [
            run["name"],
            cfg["task"],
            cfg["search"]["mode"],
            cfg["search"]["strategy"],
            _mutator(run),
            f"{cfg['cascade']['full_steps']:,} x {cfg['search']['seeds']}",
            str(len(records)),
            str(rejected),
            f"{first['success']:.3f}" if first else "-",
            f"**{best['success']:.3f}** ({seeds})" if best else "-",
            *_calls(run["usage"]),
            f"${run['spend_usd']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Every run's best success so far over iterations, one step line each."""
    from matplotlib.ticker import MaxNLocator

    from limen_jax.plots import _pyplot, best_so_far

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        line = best_so_far(run["records"])
        cfg = run["config"]
        budget = f"{cfg['cascade']['full_steps']:,} steps x {cfg['search']['seeds']}"
        label = f"{run['name']} ({cfg['search']['mode']}, {budget})"
        if len(line) == 1:  # no search (the sparse baseline): a level to beat
            ax.axhline(line[0], linestyle="--", color="grey", label=label)
        else:
            ax.step(range(len(line)), line, where="post", label=label, marker="o", markersize=3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations are whole numbers
    ax.set_xlabel("iteration")
    ax.set_ylabel("best success so far")
    ax.set_ylim(-0.05, 1.05)
    tasks = sorted({run["config"]["task"] for run in runs})
    ax.set_title(", ".join(tasks))
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    about = __doc__.split("\n\n")[0].replace("``", "")  # plain text in a terminal
    p = argparse.ArgumentParser(prog="python -m limen_jax.compare", description=about)
    p.add_argument("runs", nargs="+", type=Path, help="run directories")
    p.add_argument("--plot", type=Path, default=None, help="write the best-so-far curves to this image")
    args = p.parse_args(argv)
    plot_ok = args.plot is None or (args.plot.parent.is_dir() and args.plot.suffix.lower() in (".png", ".pdf", ".svg"))
    if not plot_ok:
        print(f"--plot needs a .png, .pdf or .svg path in an existing directory, got {args.plot}", file=sys.stderr)
        return 2
    runs = []
    for run_dir in args.runs:
        try:
            runs.append(load_run(run_dir))
        except (OSError, KeyError, json.JSONDecodeError) as exc:
            print(f"{run_dir}: not a run directory with a checkpoint ({exc})", file=sys.stderr)
            return 2
    print(table(runs))
    if args.plot is not None:
        plot(runs, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
