-- Disposition counters of the accounting ledger, SUMMED across writer_id (docs/sources.md, accounting ledger).
-- counter_id is the hash of the key JSON, so every writer's row of one key shares it.
SELECT escrow_id, counter_id, (array_agg(counter_key ORDER BY writer_id))[1] AS counter_key,
       sum(count)::bigint AS count, count(DISTINCT writer_id)::bigint AS writers,
       count(*)::bigint AS source_rows
FROM accounting_escrow_counters
GROUP BY escrow_id, counter_id
