"""Check an interface program: ``python -m limen_jax.check --task xland_easy my_interface.py``.

Prints the verdict, the descriptors (observation dimension, reward AST size) and, when
the program is rejected, the stage, the message and the program's trace. The program
runs only in a sandboxed worker process; ``python -m limen_jax.check --sandbox-info``
says which mechanism protects this machine (docs/security.md).
Exit status: 0 trainable, 1 rejected, 2 usage error (unknown task, unreadable file),
3 the sandbox itself failed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import TYPE_CHECKING

from limen_jax.cli_errors import report_bugs

if TYPE_CHECKING:
    from limen_jax.program import CheckReport

# Heavy imports (jax, the task suite) wait until the arguments are known to be valid.

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_SANDBOX = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m limen_jax.check",
        description="Check whether an interface program (get_observation / compute_reward) can be trained.",
    )
    parser.add_argument(
        "program", nargs="?", help="a .py file, or a text file holding an LLM reply with a ```python block"
    )
    parser.add_argument("--task", help="registered task name (e.g. xland_easy) or package.module:Class")
    parser.add_argument(
        "--sandbox-info", action="store_true", help="print the isolation mechanism that protects this machine and exit"
    )
    parser.add_argument("--mode", choices=("full", "obs_only", "reward_only"), default="full",
                        help="what the program defines: both functions (full, the default), get_observation only "
                             "(obs_only) or compute_reward only (reward_only)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return parser


@report_bugs
def main(argv: list[str] | None = None) -> int:
    """Run the checker; return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on bad usage, 0 on --help
        return int(exit_.code or 0)
    if args.sandbox_info:
        from limen_jax.program.isolation import describe

        info = describe()
        if args.json:
            print(json.dumps(info))
        else:
            print(f"mechanism: {info['mechanism']}")
            print("protects with: " + "; ".join(info["protections"]))
            if info["missing"]:
                print("missing: " + "; ".join(info["missing"]))
        return EXIT_OK
    if args.program is None or args.task is None:
        print("error: a program file and --task are required (or --sandbox-info)", file=sys.stderr)
        return EXIT_USAGE
    path = pathlib.Path(args.program)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read {path}: {exc.strerror if isinstance(exc, OSError) else exc}", file=sys.stderr)
        return EXIT_USAGE

    from limen_jax.registry import task_problem
    from limen_jax.task import make

    try:
        task = make(args.task)
    except (KeyError, ValueError, ImportError, AttributeError) as exc:
        print(f"error: {task_problem(args.task, exc)}", file=sys.stderr)
        return EXIT_USAGE

    from limen_jax.program import SandboxError, check_source

    try:
        report = check_source(source, task, args.mode, name=path.stem)
    except SandboxError as exc:
        print(f"error: the sandbox failed (not the program's fault): {exc}", file=sys.stderr)
        return EXIT_SANDBOX
    if args.json:
        print(json.dumps({"task": args.task, "program": str(path), "mode": args.mode, **report.to_dict()}))
    else:
        print(_text(report, args.task, str(path), args.mode))
    return EXIT_OK if report.ok else EXIT_REJECTED


def _text(report: CheckReport, task: str, program: str, mode: str) -> str:
    lines = [
        f"task: {task}    program: {program}    mode: {mode}",
        f"verdict: {'TRAINABLE' if report.ok else 'REJECTED'}",
        f"obs_dim: {report.obs_dim if report.obs_dim is not None else '-'}",
        f"reward_ast_size: {report.reward_ast_size if report.reward_ast_size is not None else '-'}",
        f"checked in {report.seconds:.1f} s",
    ]
    if report.error is not None:
        lines += [f"stage: {report.error.stage}", f"message: {report.error.message}"]
        if report.error.trace:
            lines += ["trace:", *("  " + ln for ln in report.error.trace.splitlines())]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
