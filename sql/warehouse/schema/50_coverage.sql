-- Several copies of one escrow (pipeline/ingest/coverage.py): which nonce ranges of its diff log each
-- copy holds, where copies disagree on a diff's bytes, and what the warehouse holds per escrow.

-- The digest of a diff's bytes (sha256 of txs_proto, hex): two copies' diffs at one (escrow, nonce)
-- are the same diff when their digests are equal. NULL in rows written before the column existed.
ALTER TABLE raw_diffs ADD COLUMN IF NOT EXISTS digest VARCHAR;

-- The copy a sealed row came from and how far that copy's session was (its latest_nonce): a sealed
-- row replaces the stored one when it ranks higher (a real seal over a live row, a full row over a
-- bare one, then the copy further along, then the source id), whatever order the copies came in.
ALTER TABLE raw_sealed_inferences ADD COLUMN IF NOT EXISTS seal_source_id VARCHAR;
ALTER TABLE raw_sealed_inferences ADD COLUMN IF NOT EXISTS seal_copy_nonce BIGINT;

-- Nonce ranges [lo, hi] of an escrow's diff log that one copy (source) holds: ranges, not nonces.
-- A copy's diffs below the highest nonce its source already gave are not read again (a source's
-- diffs are immutable); everything above it is read, so a copy fills every range the warehouse lacks.
CREATE TABLE IF NOT EXISTS raw_diff_coverage (
  escrow_id VARCHAR NOT NULL, source_id VARCHAR NOT NULL, lo BIGINT NOT NULL, hi BIGINT NOT NULL,
  PRIMARY KEY (escrow_id, source_id, lo));

-- Forks: copies holding different bytes of the diff at one (escrow, nonce). One row per version and
-- copy (the copy that stored a version and every copy read after the fork was found). The replay
-- uses the version whose digest sorts first; the escrow is marked conflicted.
CREATE TABLE IF NOT EXISTS raw_diff_forks (
  escrow_id VARCHAR NOT NULL, nonce BIGINT NOT NULL, source_id VARCHAR NOT NULL, digest VARCHAR NOT NULL,
  epoch_id BIGINT, created_at BIGINT, run_id VARCHAR, PRIMARY KEY (escrow_id, nonce, source_id));

-- Host signatures (signatures.sig) by their digest (sha256, hex), to compare copies: per (escrow, nonce,
-- slot) the version whose digest sorts first, and the source that gave it.
CREATE TABLE IF NOT EXISTS raw_signature_digests (
  escrow_id VARCHAR NOT NULL, nonce BIGINT NOT NULL, slot_id BIGINT NOT NULL, epoch_id BIGINT, digest VARCHAR NOT NULL,
  source_id VARCHAR, PRIMARY KEY (escrow_id, nonce, slot_id));

-- Copies holding different signatures at one (escrow, nonce, slot): one row per version and copy.
CREATE TABLE IF NOT EXISTS raw_signature_forks (
  escrow_id VARCHAR NOT NULL, nonce BIGINT NOT NULL, slot_id BIGINT NOT NULL, source_id VARCHAR NOT NULL,
  digest VARCHAR NOT NULL, epoch_id BIGINT, run_id VARCHAR, PRIMARY KEY (escrow_id, nonce, slot_id, source_id));

-- Per escrow: the nonce ranges the warehouse holds (all copies together), what of 1 .. latest_nonce
-- no copy held, and whether copies disagree (forked diffs, conflicting sealed rows or signatures). Recomputed for
-- the escrows an ingest touches.
CREATE TABLE IF NOT EXISTS d_escrow_coverage (
  escrow_id VARCHAR PRIMARY KEY, latest_nonce BIGINT, held_nonces BIGINT, held_ranges VARCHAR,
  missing_nonces BIGINT, missing_ranges VARCHAR, complete BOOLEAN, forked_nonces BIGINT,
  conflicting_seals BIGINT, conflicted BOOLEAN);
ALTER TABLE d_escrow_coverage ADD COLUMN IF NOT EXISTS conflicting_signatures BIGINT;

-- A warehouse written before coverage was kept: each stored diff counts for the source of the run that
-- wrote it, so that the next ingest of that source reads only what is new (once, while the table is empty).
INSERT INTO raw_diff_coverage BY NAME (
  WITH held AS (
    SELECT d.escrow_id, r.source_id, d.nonce,
           d.nonce - row_number() OVER (PARTITION BY d.escrow_id, r.source_id ORDER BY d.nonce) AS island
    FROM raw_diffs d JOIN ingest_runs r USING (run_id)
    WHERE NOT EXISTS (SELECT 1 FROM raw_diff_coverage)
  )
  SELECT escrow_id, source_id, min(nonce) AS lo, max(nonce) AS hi FROM held GROUP BY escrow_id, source_id, island);
