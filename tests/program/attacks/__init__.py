"""Attack programs against the checker, one class per module (see test_program_attacks.py).

Each module defines ``ATTACKS: dict[str, str]``, attack name to program source. ``@@TARGET@@``
in a source is replaced by a path outside the worker's scratch that the attack tries to
write; the test then asserts that nothing was written there. ``@@PORT@@`` is the port of a
socket the test listens on; it asserts that no connection reached it. ``@@XLA_ENTRY@@`` is an
existing entry of the XLA cache the engine uses and ``@@RUN_DIR@@`` a populated run directory
(events.jsonl, state.json, programs/): the test asserts that both, with HOME and the temp dir,
are byte for byte as they were (side_effects.py). Every attack also returns
valid values, so a program whose attack silently does nothing is accepted and must then
train harmlessly.
"""

HEAD = "import jax\nimport jax.numpy as jnp\n\n"
OK_OBS = "    return jnp.stack([state.agent.position[0], state.agent.position[1]]).astype(jnp.float32)\n"
OK_REWARD = (
    "def compute_reward(state, action, next_state):\n"
    "    return (next_state.agent.position[0] - state.agent.position[0]).astype(jnp.float32)\n"
)


def in_observation(body: str) -> str:
    """A program whose ``get_observation`` runs ``body`` (indented lines) first."""
    lines = "".join(f"    {ln}\n" for ln in body.strip("\n").splitlines())
    return HEAD + "def get_observation(state):\n" + lines + OK_OBS + "\n" + OK_REWARD


def at_module_level(body: str) -> str:
    """A program whose module body runs ``body`` first."""
    return HEAD + body.strip("\n") + "\n\ndef get_observation(state):\n" + OK_OBS + "\n" + OK_REWARD
