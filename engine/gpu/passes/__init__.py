"""The frame pipeline (gpu): shadow, forward, outline mask, screen-space outline, post-process."""
