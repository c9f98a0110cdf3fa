"""Paths and guards: each path checked in its role before any work (roles), and outputs that never destroy
an input, written whole or not at all (safety)."""
