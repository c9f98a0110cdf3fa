-- What the warehouse holds of each escrow's diff log (all copies together), for the escrows in
-- coverage_escrows: held ranges, the nonces of 1 .. latest_nonce (the furthest copy's session) that
-- no copy held, and the conflicts between copies (forked diffs, conflicting real seals and signatures).
CREATE OR REPLACE TEMP TABLE coverage_rows AS
WITH bounds AS (
  SELECT s.escrow_id, coalesce(s.latest_nonce, 0) AS latest_nonce
  FROM raw_sessions s JOIN coverage_escrows USING (escrow_id)
),
held AS (
  SELECT escrow_id, nonce, nonce - row_number() OVER (PARTITION BY escrow_id ORDER BY nonce) AS island
  FROM raw_diffs JOIN coverage_escrows USING (escrow_id)
),
ranges AS (SELECT escrow_id, min(nonce) AS lo, max(nonce) AS hi FROM held GROUP BY escrow_id, island),
gaps AS (  -- before each held range, and after the last one up to latest_nonce
  SELECT escrow_id, coalesce(lag(hi) OVER (PARTITION BY escrow_id ORDER BY lo), 0) + 1 AS lo, lo - 1 AS hi FROM ranges
  UNION ALL
  SELECT b.escrow_id, coalesce(max(r.hi), 0) + 1, b.latest_nonce
  FROM bounds b LEFT JOIN ranges r USING (escrow_id) GROUP BY b.escrow_id, b.latest_nonce
),
missing AS (
  SELECT g.escrow_id, g.lo, least(g.hi, b.latest_nonce) AS hi
  FROM gaps g JOIN bounds b USING (escrow_id) WHERE g.lo <= least(g.hi, b.latest_nonce)
),
held_text AS (
  SELECT escrow_id, sum(hi - lo + 1) AS n,
         string_agg(CASE WHEN lo = hi THEN lo::VARCHAR ELSE lo || '-' || hi END, ',' ORDER BY lo) AS ranges
  FROM ranges GROUP BY escrow_id
),
missing_text AS (
  SELECT escrow_id, sum(hi - lo + 1) AS n,
         string_agg(CASE WHEN lo = hi THEN lo::VARCHAR ELSE lo || '-' || hi END, ',' ORDER BY lo) AS ranges
  FROM missing GROUP BY escrow_id
),
forks AS (
  SELECT escrow_id, count(DISTINCT nonce) AS n FROM raw_diff_forks JOIN coverage_escrows USING (escrow_id)
  GROUP BY escrow_id
),
signatures AS (
  SELECT escrow_id, count(DISTINCT (nonce, slot_id)) AS n FROM raw_signature_forks JOIN coverage_escrows USING (escrow_id)
  GROUP BY escrow_id
),
seals AS (
  SELECT escrow_id, count(DISTINCT inference_id) AS n FROM raw_sealed_conflicts JOIN coverage_escrows USING (escrow_id)
  GROUP BY escrow_id
)
SELECT b.escrow_id, b.latest_nonce, coalesce(h.n, 0) AS held_nonces, coalesce(h.ranges, '') AS held_ranges,
       coalesce(m.n, 0) AS missing_nonces, coalesce(m.ranges, '') AS missing_ranges,
       coalesce(m.n, 0) = 0 AS complete, coalesce(f.n, 0) AS forked_nonces, coalesce(s.n, 0) AS conflicting_seals,
       coalesce(f.n, 0) + coalesce(s.n, 0) + coalesce(g.n, 0) > 0 AS conflicted,
       coalesce(g.n, 0) AS conflicting_signatures
FROM bounds b
LEFT JOIN held_text h USING (escrow_id) LEFT JOIN missing_text m USING (escrow_id)
LEFT JOIN forks f USING (escrow_id) LEFT JOIN seals s USING (escrow_id)
LEFT JOIN signatures g USING (escrow_id);
INSERT OR REPLACE INTO d_escrow_coverage BY NAME (SELECT * FROM coverage_rows);
DROP TABLE coverage_rows;
