"""pass_resolve.pack: the averaged passes' channels packed into vec4 outputs (first fit, largest
first); every channel lands once, no output holds more than four, too many raise."""
import pytest

from stylized_renderer.engine.gpu.passes.pass_resolve import pack

ALL = [("Normal", 3, "n"), ("Mist", 1, "m"), ("Shadow", 1, "a"), ("Shade", 1, "b"), ("Rim", 3, "r"),
       ("DiffCol", 3, "d"), ("Emit", 3, "e"), ("Outline", 4, "o")]


def test_every_pass_written_packs_into_five_outputs():
    outputs, layout = pack(ALL, 5)
    assert len(outputs) == 5
    used = {}
    for name, slot, c0, ch in layout:
        assert 0 <= c0 and c0 + ch <= 4
        for c in range(c0, c0 + ch):
            assert (slot, c) not in used, (name, used.get((slot, c)))
            used[(slot, c)] = name
    assert {n for n, *_ in layout} == {n for n, *_ in ALL}
    exprs = dict(outputs)
    for name, slot, _, _ in layout:
        assert dict((n, e) for n, _, e in ALL)[name] in exprs[slot]
    assert all(e.startswith("vec4(") for e in exprs.values())


def test_too_many_channels_raise():
    with pytest.raises(ValueError):
        pack(ALL + [("X", 4, "x")], 5)
