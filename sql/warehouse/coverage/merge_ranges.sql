-- A copy's nonce ranges per escrow: the nonces it holds in this chunk (new_held: escrow_id, nonce,
-- source_id) merged with the ranges its source already gave, adjacent and overlapping ones joined.
CREATE OR REPLACE TEMP TABLE merged_ranges AS
WITH touched AS (SELECT DISTINCT escrow_id, source_id FROM new_held),
runs AS (  -- consecutive nonces first collapse to one range each (nonce - its rank is constant along a run)
  SELECT escrow_id, source_id, nonce, nonce - row_number() OVER (PARTITION BY escrow_id, source_id ORDER BY nonce) AS run
  FROM new_held
),
held AS (
  SELECT c.escrow_id, c.source_id, c.lo, c.hi FROM raw_diff_coverage c JOIN touched USING (escrow_id, source_id)
  UNION ALL
  SELECT escrow_id, source_id, min(nonce), max(nonce) FROM runs GROUP BY escrow_id, source_id, run
),
ordered AS (
  SELECT *, max(hi) OVER (PARTITION BY escrow_id, source_id ORDER BY lo, hi
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM held
),
islands AS (
  SELECT *, sum(CASE WHEN reach IS NULL OR lo > reach + 1 THEN 1 ELSE 0 END)
              OVER (PARTITION BY escrow_id, source_id ORDER BY lo, hi) AS island
  FROM ordered
)
SELECT escrow_id, source_id, min(lo) AS lo, max(hi) AS hi FROM islands GROUP BY escrow_id, source_id, island;
DELETE FROM raw_diff_coverage c USING (SELECT DISTINCT escrow_id, source_id FROM merged_ranges) t
WHERE c.escrow_id = t.escrow_id AND c.source_id = t.source_id;
INSERT INTO raw_diff_coverage BY NAME (SELECT escrow_id, source_id, lo, hi FROM merged_ranges);
DROP TABLE merged_ranges;
