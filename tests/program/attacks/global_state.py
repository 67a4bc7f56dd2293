"""Process-wide state: flags, guards, PRNG implementations and primitive hooks that would
change every later candidate and the trainer if the program ran in the engine."""

from attacks import at_module_level, in_observation

ATTACKS = {
    "enable_x64_set_global": in_observation("jax.enable_x64.set_global(True)"),
    "enable_x64_at_import": at_module_level("jax.enable_x64.set_global(True)"),
    "primitive_impl_hook": in_observation("jax.lax.add_p.def_impl(lambda *a, **k: 0)"),
    "primitive_abstract_eval_hook": in_observation("jax.lax.mul_p.def_abstract_eval(lambda *a, **k: None)"),
    "transfer_guard": in_observation("jax.transfer_guard('disallow').__enter__()"),
    "config_update": in_observation("jax.config.update('jax_enable_x64', True)"),
    "default_prng_via_tree_map": in_observation("jax.tree.map(jax.enable_x64.set_global, [True])"),
    "numpy_rank_promotion": in_observation("jax.numpy_rank_promotion('raise').__enter__()"),
}
