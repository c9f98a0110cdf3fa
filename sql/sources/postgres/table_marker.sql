-- One table's change marker: its row count and the sum of a 64-bit hash (the first 16 hex digits of
-- md5) of each row's text (or of its key): any row added, removed or changed moves it, in any order.
-- The table and the row's text go in below.
SELECT '{table}' AS part,
       count(*)::text || ':' || coalesce(sum(('x' || left(md5({row}), 16))::bit(64)::bigint::numeric), 0)::text AS marker
FROM "{table}" t
