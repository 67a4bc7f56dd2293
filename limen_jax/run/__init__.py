"""What one search run needs beside the loop (:mod:`limen_jax.loop`).

- :mod:`~limen_jax.run.start`: where a run starts (``lj.evolve``, ``lj.resume``): the task
  resolved once, the settings checked before the run dir is made; :mod:`~limen_jax.run.cli`
  the command line behind ``python -m limen_jax.evolve``;
- :mod:`~limen_jax.run.state`: the typed state a run carries between batches, opened once;
- :mod:`~limen_jax.run.record`, :mod:`~limen_jax.run.writes`, :mod:`~limen_jax.run.timing`:
  recording a batch (scores, outcomes, what is written, the timing line);
- :mod:`~limen_jax.run.interfaces`: the check sample fetched ahead, stored interfaces reloaded;

- :mod:`~limen_jax.run.ask`: the LLM and the checker, per request;
- :mod:`~limen_jax.run.repeats`: programs that behave exactly like an earlier one of the
  run, never trained twice;
- :mod:`~limen_jax.run.run_mutator`: the run's mutator and what it has cost;
- :mod:`~limen_jax.run.run_demos`: the run's demonstrations;
- :mod:`~limen_jax.run.batch_jobs`: a batch's evaluation jobs as the loop hands them over;
- :mod:`~limen_jax.run.pipeline`: whether the next batch is asked while this one trains;
- :mod:`~limen_jax.run.interrupts`: the signals that stop a run at a safe point;
- :mod:`~limen_jax.run.outputs`: what a run prints and leaves.
"""
