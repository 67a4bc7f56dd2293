"""How a program is judged, and where that runs.

- :mod:`~limen_jax.search.evaluation.kind_registry`: evaluation kinds by name, and the
  job runner every evaluator calls;
- :mod:`~limen_jax.search.evaluation.training_kinds`: the ``ppo`` and ``retrain`` kinds,
  the context every kind is built from and the protocol a kind implements;
- :mod:`~limen_jax.search.evaluation.episodes`, :mod:`~limen_jax.search.evaluation.learner`,
  :mod:`~limen_jax.search.evaluation.demo_ranking`: the ``episodes``, ``learner`` and
  ``demos`` kinds;
- :mod:`~limen_jax.search.evaluation.jobs`: the job and its results, as data;
- :mod:`~limen_jax.search.evaluation.train_job`: a job trained in this process;
- :mod:`~limen_jax.search.evaluation.evaluator`: the :class:`Evaluator` protocol and the
  in-process one; :mod:`~limen_jax.search.evaluation.ray_evaluator` the Ray one, its
  workers in :mod:`~limen_jax.search.evaluation.remote`;
- :mod:`~limen_jax.search.evaluation.prescreen`: demonstration ranking before training.
"""
