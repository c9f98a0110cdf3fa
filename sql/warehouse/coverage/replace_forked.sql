-- A fork's replay uses the version whose digest sorts first (whatever order the copies came in):
-- where this copy's version sorts before the stored one, the stored diff and its transactions go,
-- and the insert that follows writes this copy's.
CREATE OR REPLACE TEMP TABLE replaced_diffs AS
SELECT n.escrow_id, n.nonce FROM new_diffs n JOIN raw_diffs r USING (escrow_id, nonce) WHERE n.digest < r.digest;
DELETE FROM tx_log t USING replaced_diffs x WHERE t.escrow_id = x.escrow_id AND t.nonce = x.nonce;
DELETE FROM raw_diffs d USING replaced_diffs x WHERE d.escrow_id = x.escrow_id AND d.nonce = x.nonce;
DROP TABLE replaced_diffs;
