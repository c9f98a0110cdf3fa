-- This chunk's diffs (new_diffs) that the warehouse already holds with the same bytes.
SELECT count(*) AS n FROM new_diffs n JOIN raw_diffs r USING (escrow_id, nonce) WHERE n.digest = r.digest
