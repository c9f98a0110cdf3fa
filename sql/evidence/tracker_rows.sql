-- tracker_participants summed over models per (epoch, participant), with the findings listed.
-- params: $host (NULL = every participant), $epochs (list of epochs; NULL = all)
WITH p AS (
  SELECT epoch_id, participant, sum(assigned_nonces)::BIGINT AS assigned_nonces, sum(delivered)::BIGINT AS delivered,
         sum(delivered_outside_poc)::BIGINT AS delivered_outside_poc, sum(slow_decode)::BIGINT AS slow_decode,
         sum(slow_chunk)::BIGINT AS slow_chunk, sum(protocol_invalid)::BIGINT AS protocol_invalid,
         sum(protocol_misses)::BIGINT AS protocol_misses, string_agg(DISTINCT origin, ',') AS origin
  FROM tracker_participants
  WHERE ($host::VARCHAR IS NULL OR participant = $host)
    AND ($epochs::BIGINT[] IS NULL OR list_contains($epochs::BIGINT[], epoch_id))
  GROUP BY ALL
),
f AS (
  SELECT epoch_id, participant,
         string_agg(code || ' (' || severity || ')', ', ' ORDER BY severity, code) AS findings,
         count(*) FILTER (WHERE severity = 'critical') AS critical, count(*) AS n_findings
  FROM tracker_findings GROUP BY ALL
)
SELECT p.*, coalesce(f.findings, '') AS findings, coalesce(f.critical, 0) AS critical, coalesce(f.n_findings, 0) AS n_findings
FROM p LEFT JOIN f USING (epoch_id, participant)
ORDER BY epoch_id, participant
