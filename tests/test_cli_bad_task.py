"""Every CLI answers an unknown task with one line that says so once, lists the known
tasks and families, exits 2 and creates nothing."""

from __future__ import annotations

import importlib

import pytest

# the evolve CLI's code (importing the script module would rebind lj.evolve to it)
MODULE = {"evolve": "run.cli"}
CLIS = {
    "check": lambda f, d: ["--task", "nope", str(f)],
    "train": lambda f, d: ["--task", "nope", "--default", "--save-policy", str(d / "policy")],
    "evolve": lambda f, d: ["--task", "nope", "--run-dir", str(d / "run")],
    "tasks": lambda f, d: ["--context", "nope"],
}


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_an_unknown_task_is_one_line_once(cli, tmp_path, capsys):
    program = tmp_path / "mine.py"
    program.write_text("def get_observation(state):\n    return state\n")
    made = tmp_path / "made"
    made.mkdir()
    assert importlib.import_module(f"limen_jax.{MODULE.get(cli, cli)}").main(CLIS[cli](program, made)) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.count("unknown task 'nope'") == 1, err
    assert "xland_easy" in err and "playground:<env>" in err and "Traceback" not in err
    assert list(made.iterdir()) == []


def test_a_module_path_that_does_not_import_is_named(capsys):
    from limen_jax.run.cli import main as evolve_main

    assert evolve_main(["--task", "no_such_pkg.mod:Task"]) == 2
    assert capsys.readouterr().err == "error: unknown task 'no_such_pkg.mod:Task': no module 'no_such_pkg'\n"
