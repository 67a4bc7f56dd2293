"""Makes ``tests/`` importable for shared helpers (``mujoco_extra``)."""
