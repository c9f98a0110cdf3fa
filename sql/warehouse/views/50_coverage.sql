-- Several copies of one escrow (pipeline/ingest/coverage.py): the ranges each copy gave, and forks.

CREATE OR REPLACE VIEW escrow_coverage AS
SELECT c.escrow_id, s.epoch_id, c.source_id, c.lo, c.hi
FROM raw_diff_coverage c LEFT JOIN raw_sessions s USING (escrow_id);

CREATE OR REPLACE VIEW diff_forks AS
SELECT f.epoch_id, f.escrow_id, f.nonce, f.digest, f.source_id, f.created_at,
       f.digest = min(f.digest) OVER (PARTITION BY f.escrow_id, f.nonce) AS replayed
FROM raw_diff_forks f;

COMMENT ON VIEW escrow_coverage IS 'Per escrow and source (copy lineage): the nonce ranges [lo, hi] of the escrow''s diff log that the source''s copies held. Ranges of all sources together, and what no copy held, are the escrows view''s held_ranges and missing_ranges.';
COMMENT ON VIEW diff_forks IS 'Diffs that two copies hold with different bytes at one (escrow_id, nonce): one row per version (digest = sha256 of txs_proto) and copy holding it (the copy that stored a version, and every copy read after the fork was found). replayed = the version the replay uses: the one whose digest sorts first, whatever order the copies came in. Each copy''s version is also a quarantine row under its source; the escrow is conflicted in escrows.';
