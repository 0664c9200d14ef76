"""What users touch, one package each: preview, VRM, spring bones, materials."""
