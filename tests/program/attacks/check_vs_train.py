"""Programs that behave one way when checked and another when trained: state kept between
traces (iterators, closure cells, mutable defaults, numpy boxes) and huge values only in
states the checker does not sample."""

from attacks import HEAD, OK_REWARD

ATTACKS = {
    "iterator_changes_width": HEAD
    + (
        "WIDTHS = iter([2, 7, 7, 7, 7, 7, 7, 7])\n\n"
        "def get_observation(state):\n"
        "    return jnp.zeros(next(WIDTHS), jnp.float32) + state.agent.position[0]\n\n"
    )
    + OK_REWARD,
    "mutable_default_counter": HEAD
    + (
        "def get_observation(state, calls=[]):\n"
        "    calls.append(1)\n"
        "    n = 2 if len(calls) < 2 else 2 ** 20\n"
        "    return jnp.full((2,), jnp.sum(jnp.ones(n)), jnp.float32) + state.agent.position[0]\n\n"
    )
    + OK_REWARD,
    "closure_cell_counter": HEAD
    + (
        "def make():\n"
        "    seen = {}\n"
        "    def obs(state):\n"
        "        seen[len(seen)] = 1\n"
        "        return jnp.zeros(len(seen) + 1, jnp.float32) + state.agent.position[0]\n"
        "    return obs\n\n"
        "get_observation = make()\n\n"
    )
    + OK_REWARD,
    "numpy_box_counter": HEAD
    + (
        "def get_observation(state):\n"
        "    box = jnp.finfo(jnp.float32).eps.reshape(1)\n"
        "    return jnp.zeros(2, jnp.float32) + state.agent.position[0] + box[0]\n\n"
    )
    + OK_REWARD,
    "huge_reward_in_unsampled_states": HEAD
    + (
        "def get_observation(state):\n"
        "    return state.agent.position.astype(jnp.float32)\n\n"
        "def compute_reward(state, action, next_state):\n"
        "    far = state.step_num > 100000\n"
        "    r = (next_state.agent.position[0] - state.agent.position[0]).astype(jnp.float32)\n"
        "    return jnp.where(far, jnp.float32(1e30), r)\n"
    ),
}
