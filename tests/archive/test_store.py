from __future__ import annotations

import json
import math

import pytest
from archive_helpers import rec

from limen_jax.archive import ProgramRecord, ProgramStore, program_id


def full_record() -> ProgramRecord:
    return ProgramRecord(
        id="it0003-c01",
        code="def get_observation(state):\n    return state\n",
        iteration=3,
        island=2,
        parent_ids=["it0001-c00", "it0002-c01"],
        obs_dim=17,
        reward_ast_size=42,
        success_per_seed=[0.5, 0.75, 1.0],
        success=0.75,
        final_return=3.25,
        curves={"success": [0.0, 0.5, 0.75], "return": [0.1, 1.0, 3.25]},
        feedback={"trend": "improving"},
        error=None,
        stage="full",
        metadata={"mutator": "offline", "cost": 0.0},
    )


def test_record_json_round_trip_is_identity():
    r = full_record()
    text = json.dumps(r.to_dict())
    back = ProgramRecord.from_dict(json.loads(text))
    assert back == r
    assert json.dumps(back.to_dict()) == text


def test_record_rejects_unknown_keys_and_stages():
    with pytest.raises(ValueError, match="unknown keys"):
        ProgramRecord.from_dict({**full_record().to_dict(), "fitness": 1.0})
    with pytest.raises(ValueError, match="unknown stage"):
        ProgramRecord("x", "", stage="done")  # type: ignore[arg-type]


def test_evaluated_and_failed_flags():
    assert rec("a", 0.0).evaluated
    bad = rec("b", None, error={"stage": "validate", "message": "nan", "trace": ""})
    assert bad.failed and not bad.evaluated
    crashed = ProgramRecord("c", "", success=0.4, stage="short", error={"stage": "train", "message": "oom"})
    assert not crashed.evaluated


def test_program_id_sorts_by_iteration_then_index():
    assert program_id(3, 1) == "it0003-c01"
    assert sorted([program_id(10, 0), program_id(2, 5)]) == ["it0002-c05", "it0010-c00"]


def test_store_queries_exact():
    store = ProgramStore()
    store.add(rec("a", 0.5))
    store.add(rec("f1", None, error={"stage": "extract", "message": "no code"}))
    store.add(rec("b", 0.9))
    store.add(rec("c", 0.5))  # ties with a: a was first, so a ranks first
    store.add(rec("f2", None, error={"stage": "validate", "message": "nan"}))
    assert len(store) == 5 and "b" in store and "z" not in store
    assert store.best().id == "b"
    assert [r.id for r in store.top_k(3)] == ["b", "a", "c"]
    assert [r.id for r in store.top_k(10)] == ["b", "a", "c"]  # failures never rank
    assert [r.id for r in store.top_k(2, key=lambda r: -math.fabs(r.success - 0.45))] == ["a", "c"]
    with pytest.raises(ValueError, match="already"):
        store.add(rec("a", 0.1))
    with pytest.raises(KeyError, match="no program"):
        store.get("zz")


def test_store_json_round_trip():
    store = ProgramStore([full_record(), rec("b", 0.1), rec("f", None, error={"stage": "x", "message": "y"})])
    back = ProgramStore.from_json(store.to_json())
    assert [r.id for r in back] == [r.id for r in store]
    assert back.to_json() == store.to_json()
    assert ProgramStore().best() is None
