-- An accounting ledger (PostgreSQL row layout) for a scale copy, derived from its sessions:
-- two writers, per escrow 16 slots x 8 dispositions of counters per writer, host stats per slot,
-- a protocol-only nonce every 20 nonces, a challenge every 100, an invalid nonce every 200.
INSERT INTO accounting_meta VALUES ('schema_version', '7'), ('updated_at', '2026-11-30T12:00:00.000000001Z');
INSERT INTO accounting_writers VALUES ('gw-a', '2026-11-30T12:00:00.000000001Z', 0),
                                      ('gw-b', '2026-11-30T11:59:59.000000001Z', 0);
INSERT INTO accounting_escrow_state
SELECT escrow_id, epoch_id, 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8',
       convert_to(json_build_object('creation_epoch', epoch_id, 'slots', group_json::json)::text, 'UTF8'),
       CASE WHEN status = 'settled' THEN 'settled' ELSE 'active' END,
       CASE WHEN status = 'settled' THEN 3 ELSE 0 END, latest_nonce
FROM devshard_sessions;
INSERT INTO accounting_escrow_counters
SELECT s.escrow_id, w.writer_id, md5(k.key), convert_to(k.key, 'UTF8'), (w.n * 7 + slot * 3 + d) % 50 + 1
FROM devshard_sessions s, generate_series(0, 15) AS slot,
     unnest(ARRAY['finished_used', 'finished_unused', 'unfinished_refused', 'unfinished_execution', 'delivered',
                  'protocol_only', 'timed_out', 'refused']) WITH ORDINALITY AS disp(name, d),
     (VALUES ('gw-a', 1), ('gw-b', 2)) AS w(writer_id, n),
     LATERAL (SELECT json_build_object('slot_id', slot, 'disposition', disp.name, 'phase', 'normal')::text AS key) k;
INSERT INTO accounting_escrow_host_stats
SELECT escrow_id, slot, slot % 3, slot % 2, 1000 + slot, 50 + slot, 48 + slot
FROM devshard_sessions, generate_series(0, 15) AS slot;
INSERT INTO accounting_escrow_protocol_nonces
SELECT escrow_id, n, n % 16 FROM devshard_sessions, generate_series(20, latest_nonce, 20) AS n;
INSERT INTO accounting_escrow_challenges
SELECT escrow_id, n, n % 16, n % 300 <> 0 FROM devshard_sessions, generate_series(100, latest_nonce, 100) AS n;
INSERT INTO accounting_escrow_invalid_nonces
SELECT escrow_id, n, n % 16 FROM devshard_sessions, generate_series(200, latest_nonce, 200) AS n;
