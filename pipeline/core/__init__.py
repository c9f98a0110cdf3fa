"""Shared primitives every stage may use: asset paths, secrets, TOML, digests, process helpers."""
