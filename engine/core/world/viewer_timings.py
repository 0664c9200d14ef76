"""ViewerCpuTimings: smoothed CPU timings shown by the Stats panel (seed: ViewerCpuTimings).

Members (milliseconds):

==================  ==========================================================
frame_interval_ms   interval between two viewport frames (FPS)
animation_ms        AnimationPlayer.update (or the timeline pose read)
skinning_ms         SkinningPaletteSet.update
morph_ms            every RuntimeMeshInstance.update
update_ms           the whole runtime update
extraction_ms       RenderExtractor.extract
pipeline_ms         FramePipeline CPU submission
ui_ms               panel drawing per viewport frame (all Stylized panels)
render_ms           the whole view_draw
==================  ==========================================================

Each value is an exponential moving average, ``avg += (sample - avg) * 0.1``; the first sample of
a member is taken as is.  ``fps = 1000 / frame_interval_ms`` when the interval is > 0, else 0.
Samples are measured with ``time.perf_counter`` (monotonic).  No bpy here.
"""
from __future__ import annotations

import math
import time
from typing import Optional

ALPHA = 0.1
FIELDS = ("frame_interval_ms", "animation_ms", "skinning_ms", "morph_ms", "update_ms",
          "extraction_ms", "pipeline_ms", "ui_ms", "render_ms")


def now_ms() -> float:
    """Monotonic clock in milliseconds (time.perf_counter)."""
    return time.perf_counter() * 1e3


class ViewerCpuTimings:
    alpha = ALPHA
    fields = FIELDS
    # the FIELDS members (EMA, ms), set by reset() (declarations only)
    frame_interval_ms: float
    animation_ms: float
    skinning_ms: float
    morph_ms: float
    update_ms: float
    extraction_ms: float
    pipeline_ms: float
    ui_ms: float
    render_ms: float

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        for f in FIELDS:
            setattr(self, f, 0.0)
        self._seen = set()
        self._last_frame_ms: Optional[float] = None
        self._pending_ui_ms: Optional[float] = None
        self.sample_count = 0

    def sample(self, **ms_values) -> None:
        """Fold one sample per given member into its EMA. Unknown names raise KeyError; None,
        NaN, infinite or negative samples are ignored (a pending measurement is not a 0)."""
        for name, value in ms_values.items():
            if name not in FIELDS:
                raise KeyError(f"unknown timing '{name}'")
            if value is None:
                continue
            v = float(value)
            if not math.isfinite(v) or v < 0.0:
                continue
            if name not in self._seen:
                self._seen.add(name)
                setattr(self, name, v)
            else:
                avg = getattr(self, name)
                setattr(self, name, avg + (v - avg) * ALPHA)
        self.sample_count += 1

    def add_ui_ms(self, ms: float) -> None:
        """Panel drawing time since the last frame (summed over panels; sampled by mark_frame)."""
        self._pending_ui_ms = (self._pending_ui_ms or 0.0) + float(ms)

    def mark_frame(self, now: Optional[float] = None) -> Optional[float]:
        """Called once per viewport frame: samples frame_interval_ms from the previous call (ms
        clock ``now``, default perf_counter) and ui_ms from the panels drawn since (none drawn:
        no sample, so a collapsed panel neither accumulates nor reports 0).
        Returns the raw interval, or None on the first call."""
        if self._pending_ui_ms is not None:
            self.sample(ui_ms=self._pending_ui_ms)
            self._pending_ui_ms = None
        t = now_ms() if now is None else float(now)
        prev, self._last_frame_ms = self._last_frame_ms, t
        if prev is None:
            return None
        interval = t - prev
        self.sample(frame_interval_ms=interval)
        return interval

    def has(self, name: str) -> bool:
        """Whether ``name`` has received a sample."""
        return name in self._seen

    @property
    def fps(self) -> float:
        fi = self.frame_interval_ms
        return 1000.0 / fi if fi > 0.0 else 0.0
