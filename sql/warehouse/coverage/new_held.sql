-- The nonces this copy holds in what is written (new_diff_digests: once each), with its source: merge_ranges.sql's
-- input. params: $source_id (this copy)
CREATE OR REPLACE TEMP TABLE new_held AS SELECT escrow_id, nonce, $source_id AS source_id FROM new_diff_digests
