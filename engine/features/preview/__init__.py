"""The viewport preview: its per-scene state and commands, Scene playback, follow / hold rules and
the morph override."""
