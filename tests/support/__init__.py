"""Helpers the tests share (rigs, scenes, readers); no test lives here."""
