"""One module per evidence table; each registers its `EvidenceSpec` (found by `registry.load_specs`)."""
