"""The MuJoCo tests skip only where the extra was never installed; a broken install fails."""

from __future__ import annotations

import importlib
import importlib.metadata

import mujoco_extra
import pytest


def _no_distribution(name: str) -> str:
    raise importlib.metadata.PackageNotFoundError(name)


def test_skips_when_the_extra_is_not_installed(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "version", _no_distribution)
    assert mujoco_extra.installed() == []
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        mujoco_extra.require_mujoco()


def test_fails_when_the_extra_is_installed_but_does_not_import(monkeypatch):
    """importorskip would have skipped here, turning a broken install green."""
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.0")
    real = importlib.import_module

    def broken(name: str, *args, **kwargs):
        if name == "mujoco.mjx":
            raise ImportError("libmujoco.so: cannot open shared object file")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", broken)
    assert "mujoco-mjx" in mujoco_extra.installed()
    with pytest.raises(ImportError, match="libmujoco"):
        mujoco_extra.require_mujoco()
