from __future__ import annotations

import pytest
from archive_helpers import TINY

from limen_jax.archive import GridSpec


@pytest.fixture
def tiny() -> GridSpec:
    return TINY
