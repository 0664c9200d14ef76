"""Runtime layer: skinning palettes, runtime meshes and morph instances, GPU streams."""
