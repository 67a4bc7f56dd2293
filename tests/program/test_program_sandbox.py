"""Run-time defences: deadlines, memory limit, restricted builtins, module proxies, guards."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from limen_jax.program import ProgramError
from limen_jax.program.deadline import Deadline, MemoryLimit, deadline
from limen_jax.program.errors import PROGRAM_FILENAME
from limen_jax.program.sandbox import exec_program, program_function, proxy

LOOP = compile("def spin():\n    while True:\n        pass\n", PROGRAM_FILENAME, "exec")


def spin_forever() -> None:
    namespace: dict = {}
    exec(LOOP, namespace)
    namespace["spin"]()


def test_deadline_interrupts_an_endless_loop_on_the_main_thread() -> None:
    start = time.monotonic()
    with pytest.raises(Deadline), deadline(0.3):
        spin_forever()
    assert time.monotonic() - start < 2.0


def test_deadline_restores_an_outer_timer_and_handler() -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        with pytest.raises(Deadline), deadline(0.2):
            spin_forever()
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 95.0 < remaining <= 100.0
        assert signal.getsignal(signal.SIGALRM) is not None and not fired
        with deadline(5.0):
            pass  # a block that ends in time leaves no alarm behind
        time.sleep(0.3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not fired


def test_deadline_off_the_main_thread_uses_a_trace_function() -> None:
    outcome: list[BaseException] = []

    def worker() -> None:
        try:
            with deadline(0.3):
                spin_forever()
        except BaseException as exc:  # recorded for the assertion
            outcome.append(exc)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    thread.join(10.0)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], Deadline)


def test_memory_limit() -> None:
    grow = compile("def grow():\n    return [[0] * 100000 for _ in range(100000)]\n", PROGRAM_FILENAME, "exec")
    namespace: dict = {}
    exec(grow, namespace)
    with pytest.raises(MemoryLimit), deadline(60.0, max_growth_bytes=200 << 20):
        namespace["grow"]()


RUNTIME = """
import jax
import jax.numpy as jnp
CALLS = []
TABLE = {"a": [1, 2]}
def get_observation(state):
    CALLS.append(1)
    return jnp.zeros(len(CALLS))
"""


def test_module_globals_are_frozen_after_the_body_runs() -> None:
    ns = exec_program(RUNTIME)
    assert ns["CALLS"] == () and ns["TABLE"]["a"] == (1, 2)
    with pytest.raises(TypeError):
        ns["TABLE"]["b"] = 3
    with pytest.raises(AttributeError):
        ns["get_observation"](None)  # cannot keep state between calls


def test_freezing_shares_sub_lists_and_refuses_cycles() -> None:
    ns = exec_program("ROW = [0.0] * 1000\nGRID = [ROW for _ in range(1000)]\n")
    assert ns["GRID"][0] is ns["GRID"][999] is ns["ROW"]
    with pytest.raises(ProgramError) as info:
        exec_program("X = []\nX.append(X)\n")
    assert info.value.stage == "exec"


def test_restricted_builtins_and_import_hook() -> None:
    ns = exec_program("X = 1\n")
    builtins = ns["__builtins__"]
    for name in ("open", "exec", "eval", "compile", "getattr", "globals", "vars", "type", "object", "input"):
        assert name not in builtins
    assert builtins["print"]("ignored") is None
    importer = builtins["__import__"]
    for name in ("os", "sys", "numpy", "jax.experimental", "jax.debug"):
        with pytest.raises(ImportError):
            importer(name)
    with pytest.raises(ImportError):
        importer("jax", fromlist=("debug",))
    assert importer("jax.numpy", fromlist=("zeros",)) is proxy("jax.numpy")
    with pytest.raises(ProgramError, match="range"):
        builtins["range"](10**9)


def test_module_proxies_refuse_escapes() -> None:
    jax_proxy = proxy("jax")
    assert jax_proxy.numpy is proxy("jax.numpy")
    assert jax_proxy.numpy.zeros(2).shape == (2,)
    for name in ("debug", "config", "experimental", "pure_callback", "__dict__", "_src", "__name__"):
        with pytest.raises(AttributeError):
            getattr(jax_proxy, name)
    with pytest.raises(AttributeError, match="not available"):
        _ = jax_proxy.lax.linalg  # a submodule outside the allowed list
    with pytest.raises(AttributeError):
        jax_proxy.numpy.pi = 3.0
    with pytest.raises(AttributeError):
        _ = proxy("jax.numpy").load


@pytest.mark.parametrize(
    ("expression", "stage"),
    [
        ("[0] * 10**9", "allocation"),
        ("10**9 * 'ab'", "allocation"),
        ("pow(10, 10**9)", "allocation"),
        ("2 ** 10**8", "allocation"),
        ("1 << 10**8", "allocation"),
        ("'%s' % ('x',)".replace("'%s'", "S"), "policy"),
    ],
)
def test_operator_guards(expression: str, stage: str) -> None:
    with pytest.raises(ProgramError) as info:
        exec_program(f"S = 'text %s'\nX = {expression}\n")
    assert info.value.stage == stage
    assert "line 2" in info.value.trace


def test_guarded_operators_keep_their_meaning() -> None:
    ns = exec_program(
        "import jax.numpy as jnp\nA = [1, 2] * 3\nB = 2 ** 10\nC = 7 % 3\nD = jnp.arange(3) * 2\nE = 1\nE *= 5\n"
    )
    assert ns["A"] == (1, 2, 1, 2, 1, 2) and ns["B"] == 1024 and ns["C"] == 1 and ns["E"] == 5
    assert ns["D"].tolist() == [0, 2, 4]


def test_annotations_are_not_evaluated() -> None:
    ns = exec_program("def get_observation(state: State) -> Array:\n    x: Unknown = 1\n    return x\n")
    assert ns["get_observation"](None) == 1


@pytest.mark.parametrize(
    ("definition", "ok"),
    [
        ("def get_observation(state):\n    return state", True),
        ("def get_observation(state, scale=2.0):\n    return state", True),
        ("def get_observation(*args):\n    return args", True),
        ("get_observation = lambda state: state", True),
        ("def get_observation():\n    return 1", False),
        ("def get_observation(state, other):\n    return 1", False),
        ("def get_observation(state, *, flag):\n    return 1", False),
    ],
)
def test_program_function_signatures(definition: str, ok: bool) -> None:
    ns = exec_program(definition + "\n")
    if ok:
        assert callable(program_function(ns, "get_observation", 1, "state"))
    else:
        with pytest.raises(ProgramError) as info:
            program_function(ns, "get_observation", 1, "state")
        assert info.value.stage == "signature"
