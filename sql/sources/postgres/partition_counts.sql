-- Estimated-free exact row counts per epoch partition of every partitioned devshard_* parent.
-- Children are named <parent>_epoch_<N> (docs/sources.md, PostgreSQL layout).
WITH children AS (
  SELECT p.relname::text AS parent, c.relname::text AS child,
         substring(c.relname FROM '_epoch_([0-9]+)$')::bigint AS epoch_id
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
  JOIN pg_class p ON p.oid = i.inhparent
  WHERE c.relkind IN ('r', 'p') AND (p.relname LIKE 'devshard\_%' OR p.relname = 'payload_storage')
)
SELECT parent, child, epoch_id,
       (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I', child), false, true, '')))[1]::text::bigint AS n
FROM children
ORDER BY parent, epoch_id
