"""The strategies that ship with the loop, one module each (registered by entry point in
pyproject.toml, like any plug-in):

- :mod:`~limen_jax.search.strategies.basic`: ``map_elites``, ``greedy``, ``independent``,
  ``sparse``;
- :mod:`~limen_jax.search.strategies.eureka`: ``eureka``;
- :mod:`~limen_jax.search.strategies.forge`: ``forge``;
- :mod:`~limen_jax.search.strategies.grace`: ``grace``;
- :mod:`~limen_jax.search.strategies.mcts`: ``mcts`` (RF-Agent), its tree in
  :mod:`~limen_jax.search.strategies.mcts_tree`;
- :mod:`~limen_jax.search.strategies.portfolio`: ``portfolio``;
- :mod:`~limen_jax.search.strategies.rda`: ``rda``, its text parsers in
  :mod:`~limen_jax.search.strategies.rda_text`.
"""
