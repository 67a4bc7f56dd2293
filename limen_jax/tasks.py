"""``python -m limen_jax.tasks``: list the registered tasks with a one-line description.

``--context NAME`` prints the markdown the LLM is given for that task.
"""

from __future__ import annotations

import argparse
import sys

from limen_jax.task import describe, make, registered_tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m limen_jax.tasks", description=__doc__)
    parser.add_argument("--context", metavar="TASK", help="print the LLM context of TASK")
    args = parser.parse_args(argv)
    if args.context:
        try:
            print(make(args.context).context)
        except (KeyError, ImportError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    names = registered_tasks()
    width = max(map(len, names))
    for name in names:
        try:
            line = describe(name)
        except ImportError as exc:  # e.g. the MuJoCo extra is not installed
            line = f"(unavailable: {exc.name or exc} — pip install 'limen_jax[mujoco]')"
        print(f"{name:<{width}}  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
