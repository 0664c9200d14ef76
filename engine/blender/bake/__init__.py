"""Bakes of what only Blender evaluates (constraints, IK, drivers, B-Bones): why (reasons),
isolation, signatures, recording, the adaptive sub-frame samples, the tables and their
interpolation, BakedPose and the cache."""
