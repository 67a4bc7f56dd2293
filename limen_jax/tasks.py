"""``python -m limen_jax.tasks``: list the registered tasks and adapter families.

``--context NAME`` prints the markdown the LLM is given for that task; ``--budgets NAME``
its evolve budgets (what ``python -m limen_jax.evolve --preset P`` runs by default).
"""

from __future__ import annotations

import argparse
import sys

from limen_jax.cli_errors import report_bugs
from limen_jax.extras import install_line
from limen_jax.registry import factory_for, families, family_missing_extra, listing, make, task_facts, task_problem


def _plain(text: str | None) -> str:
    """A docstring as --help shows it: no reStructuredText literal markers."""
    return (text or "").replace("``", "")


@report_bugs
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m limen_jax.tasks", description=_plain(__doc__))
    parser.add_argument("--context", metavar="TASK", help="print the LLM context of TASK")
    parser.add_argument("--budgets", metavar="TASK", help="print the evolve budget of each --preset for TASK")
    args = parser.parse_args(argv)
    if args.budgets:
        try:
            factory_for(args.budgets)  # an unknown name is refused, listing the known ones
        except (KeyError, ImportError) as exc:
            print(f"error: {task_problem(args.budgets, exc)}", file=sys.stderr)
            return 2
        from limen_jax.task import PRESETS, Task

        facts = task_facts(args.budgets) or Task  # as EvolveConfig.preset_for reads them
        for preset in PRESETS:
            declared = preset != "quick" or "quick" in facts.budgets
            print(f"{preset}: {facts.budget(preset).summary() if declared else 'as cpu (none declared)'}")
        return 0
    if args.context:
        try:
            print(make(args.context).context)
        except (KeyError, ImportError, ValueError, AttributeError) as exc:
            print(f"error: {task_problem(args.context, exc)}", file=sys.stderr)
            return 2
        return 0
    tasks = listing()
    fams = families()
    width = max(map(len, [*(t[0] for t in tasks), *(f"{p}:<env>" for p in fams)]))
    for name, line, missing in tasks:
        if missing:  # the task's extra is not installed
            line = f"(not installed: {install_line(missing)}) {line}"
        print(f"{name:<{width}}  {line}".rstrip())
    if fams:
        print("\nadapter families (--task <family>:<env>):")
        for prefix, line in fams.items():
            missing = family_missing_extra(prefix)
            line = f"(not installed: {install_line(missing)}) {line}" if missing else line
            print(f"{prefix + ':<env>':<{width}}  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
