"""The GPU side: the backend (vertex streams, morph and palette textures), layouts and the passes.
Imports only the core (tests/test_architecture.py)."""
