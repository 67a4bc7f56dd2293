"""The vocabulary of interface programs: which modules, names and attributes are allowed.

Shared by the AST policy (policy.py, before anything runs) and the sandbox (sandbox.py,
at run time: the import hook and the module proxies apply the same rules). Attribute
rules go by name, whatever the object: the policy cannot know what an alias points to,
so ``d = jax.debug`` and ``jax.debug`` are both refused for the name ``debug``.
"""

from __future__ import annotations

ALLOWED_MODULES = frozenset(
    {
        "math",
        "jax",
        "jax.numpy",
        "jax.numpy.linalg",
        "jax.numpy.fft",
        "jax.lax",
        "jax.nn",
        "jax.nn.initializers",
        "jax.random",
        "jax.scipy",
        "jax.scipy.special",
        "jax.scipy.stats",
        "jax.scipy.signal",
        "jax.scipy.ndimage",
        "jax.scipy.linalg",
        "jax.tree_util",
        "jax.tree",
        "jax.image",
        "jax.ops",
        "jax.dtypes",
        "jax.typing",
    }
)

# Builtins an interface program has no business naming (escapes, I/O, introspection,
# string conversion that reveals tracer types).
FORBIDDEN_NAMES = frozenset(
    {
        "open", "exec", "eval", "compile", "globals", "locals", "vars", "dir",
        "getattr", "setattr", "delattr", "hasattr", "input", "breakpoint", "help",
        "memoryview", "type", "object", "super", "classmethod", "staticmethod",
        "property", "id", "exit", "quit", "bytearray", "bytes", "format", "repr",
        "ascii", "str", "copyright", "credits", "license", "callable",
    }
)  # fmt: skip

# Attribute names blocked on every object (the policy cannot know what an alias points
# to, so `d = jax.debug` and `jax.debug` are both caught by the name "debug").
_JAX_ESCAPES = frozenset(
    {
        # submodules that do I/O, run host callbacks, or reach JAX's internals
        "debug", "experimental", "profiler", "config", "distributed", "monitoring",
        "interpreters", "core", "lib", "export", "ffi", "dlpack", "stages",
        "api_util", "sharding", "ref", "version", "custom_batching", "compilation_cache",
        # callbacks and host transfers
        "pure_callback", "io_callback", "callback", "host_callback", "infeed", "outfeed",
        "device_get", "device_put", "copy_to_host_async", "from_dlpack", "to_dlpack",
        # files and buffers
        "load", "save", "savez", "savez_compressed", "fromfile", "tofile", "frombuffer",
        "fromstring", "tobytes", "fromiter",
        # global state and eager escapes from tracing
        "ensure_compile_time_eval", "disable_jit", "clear_caches", "clear_backends",
        "live_arrays", "live_buffers", "set_printoptions", "printoptions",
        "default_device", "default_matmul_precision", "transfer_guard", "checking_leaks",
        "log_compiles", "enable_checks", "numpy_dtype_promotion", "numpy_rank_promotion",
        "make_array_from_callback", "make_array_from_process_local_data",
        "make_array_from_single_device_arrays", "print_environment_info", "effects_barrier",
        "debug_nans", "debug_infs", "debug_key_reuse", "check_tracer_leaks", "explain_cache_misses",
        "no_execution", "array_garbage_collection_guard",
        # devices, clients and staging APIs (compiling inside a trace escapes the limits)
        "devices", "local_devices", "client", "make_jaxpr", "lower", "compile",
        # tracer internals (a program must not behave differently per tracer type)
        "aval", "batch_dim", "source_info",
    }
)  # fmt: skip
# JAX submodules whose names are also ordinary Python methods (`list.extend`): refused
# only on a jax module (`jax.extend`, `from jax import extend`); the run-time module
# proxies refuse them under any alias.
JAX_ONLY_SUBMODULES = frozenset({"extend"})
# Calls that can run for minutes or build gigabytes inside one C call, where no time or
# memory limit can interrupt them.
_UNBOUNDED_C_CALLS = frozenset(
    {
        # host-side numpy index tables built eagerly from static sizes
        "tril_indices", "triu_indices", "tril_indices_from", "triu_indices_from",
        "mask_indices", "diag_indices", "diag_indices_from",
        # big-integer arithmetic
        "factorial", "comb", "perm", "lcm",
        # string padding
        "ljust", "rjust", "center", "zfill", "expandtabs",
    }
)  # fmt: skip
_INTERNALS = frozenset({"mro", "with_traceback", "format", "format_map", "func_globals", "func_code"})
_INTERNAL_PREFIXES = ("f_", "gi_", "cr_", "ag_", "tb_", "co_", "register")
_UNBOUNDED_LOOPS = frozenset({"while_loop"})


def attribute_problem(name: str) -> str | None:
    """Why accessing attribute ``name`` is forbidden, or None when it is allowed."""
    if name.startswith("_"):
        return f"attribute '{name}' is private: names starting with '_' (dunders included) cannot be accessed"
    if name in _UNBOUNDED_LOOPS:
        return (
            f"'{name}' is not allowed (unbounded loop): use jax.lax.fori_loop with constant integer "
            "bounds, or vectorise with jnp operations"
        )
    if name in ("format", "format_map"):
        return "string formatting ('.format') is not allowed; interface programs compute arrays, not text"
    if name in _INTERNALS or name.startswith(_INTERNAL_PREFIXES):
        return f"attribute '{name}' reaches interpreter internals and is not allowed"
    if name in _UNBOUNDED_C_CALLS:
        return f"'{name}' is not available: it can run too long or build too much in one step to be limited"
    if name in _JAX_ESCAPES:
        return (
            f"'{name}' is not available: interface programs may not do I/O, host callbacks or "
            "debugging, change JAX's configuration, or inspect tracers"
        )
    return None


def module_problem(name: str) -> str | None:
    """Why importing module ``name`` is forbidden, or None when it is allowed."""
    if name in ALLOWED_MODULES:
        return None
    root = name.split(".")[0]
    if root == "numpy":
        return "numpy is not available: use jax.numpy (`import jax.numpy as jnp`)"
    if root == "jax":
        return f"module '{name}' is not available; allowed: {', '.join(sorted(ALLOWED_MODULES - {'math'}))}"
    return f"import of '{name}' is not allowed: only jax (jax.numpy, jax.lax, jax.nn, ...) and math"


def name_problem(name: str) -> str | None:
    """Why the identifier ``name`` is forbidden, or None when it is allowed."""
    if name.startswith("__"):
        return f"name '{name}' is not allowed: double-underscore names are reserved"
    if name in FORBIDDEN_NAMES:
        return f"'{name}' is not available in interface programs"
    return None
