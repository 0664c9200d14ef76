"""Register/unregister a feature package's modules in order (operators/, panels/)."""
from __future__ import annotations


def register_modules(modules) -> None:
    for m in modules:
        m.register()


def unregister_modules(modules) -> None:
    for m in reversed(modules):
        m.unregister()
