-- What moves when the accounting ledger (row layout) changes, cheap to read: the meta rows, each
-- writer's updated_at / writer_errors, each escrow's latest_nonce and phase (and, where the copy has the
-- legacy table, accounting_markers_legacy.sql goes in below). One text row per marker.
SELECT 'meta:' || key || '=' || coalesce(value, '') AS marker FROM accounting_meta
UNION ALL
SELECT 'writer:' || writer_id || '=' || coalesce(updated_at, '') || '/' || coalesce(writer_errors::text, '')
FROM accounting_writers
UNION ALL
SELECT 'escrow:' || escrow_id || '=' || coalesce(latest_nonce::text, '') || '/' || coalesce(phase, '')
       || '/' || coalesce(phase_rank::text, '')
FROM accounting_escrow_state
{legacy}
