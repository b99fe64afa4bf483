"""Model loading (URDF)."""
