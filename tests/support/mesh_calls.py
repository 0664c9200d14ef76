"""Counting what a render reads, by mesh: a module function that takes a mesh first is wrapped
so each call appends the mesh's name (the real function still runs; the real path is driven)."""
from __future__ import annotations


def mesh_calls(monkeypatch, module, name: str) -> list:
    """Names of the meshes ``module.name(mesh, ...)`` is called with from now on (one entry per
    call), for the rest of the test."""
    calls = []
    real = getattr(module, name)

    def counting(mesh, *args, **kwargs):
        calls.append(mesh.name)
        return real(mesh, *args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls
