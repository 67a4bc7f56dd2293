"""``python -m limen_jax.evolve``: the command line of a run (:mod:`limen_jax.run.cli`).

Run it; do not import it: ``limen_jax.evolve`` in the package is the function
(:func:`limen_jax.run.start.evolve`), and importing this module would bind its name there.
"""

import sys

from limen_jax.run.cli import main

if __name__ == "__main__":
    sys.exit(main())
