-- Hosts of the build timeline that no escrow slot in the warehouse belongs to: a typo in builds.toml,
-- or a host the copies do not have yet. Empty while the warehouse has no escrows.
SELECT DISTINCT host FROM host_builds_t
WHERE EXISTS (SELECT 1 FROM d_escrow_slots)
  AND host NOT IN (SELECT address FROM d_escrow_slots WHERE address IS NOT NULL)
ORDER BY host
