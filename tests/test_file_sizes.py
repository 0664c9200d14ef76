"""House rule: no source file of the repository is over 600 lines (Python, GLSL, shell), so a
newcomer reads any module at one sitting; a long module is split by subject."""
from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 600
SUFFIXES = (".py", ".pyi", ".glsl", ".sh")
SKIPPED = ("out", "dist", "__pycache__")       # build outputs; hidden folders (.git, .venv-X.Y) too


def long_files(root: pathlib.Path, limit: int = LIMIT) -> list[str]:
    """'path: N lines' for every source file under ``root`` with more than ``limit`` lines."""
    found = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith(".") or part in SKIPPED for part in rel.parts[:-1]):
            continue
        if p.is_file() and p.suffix in SUFFIXES:
            n = len(p.read_text(encoding="utf-8", errors="replace").splitlines())
            if n > limit:
                found.append(f"{rel.as_posix()}: {n} lines")
    return found


def test_no_source_file_is_over_600_lines():
    assert long_files(ROOT) == []


def test_the_size_check_counts_lines(tmp_path):
    """Negative control: 601 lines are found, 600 are not; hidden folders and build outputs are
    not the repository's sources."""
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "long.py").write_text("x = 1\n" * 601)
    (tmp_path / "engine" / "fine.py").write_text("x = 1\n" * 600)
    (tmp_path / "glsl").mkdir()
    (tmp_path / "glsl" / "long.glsl").write_text("// a\n" * 700)
    (tmp_path / "notes.md").write_text("text\n" * 900)
    for hidden in (".venv-5.2", "out"):
        (tmp_path / hidden).mkdir()
        (tmp_path / hidden / "big.py").write_text("x = 1\n" * 900)
    assert long_files(tmp_path) == ["engine/long.py: 601 lines", "glsl/long.glsl: 700 lines"]
