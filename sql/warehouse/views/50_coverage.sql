-- Several copies of one escrow (pipeline/ingest/coverage.py): the ranges each copy gave, and forks.

CREATE OR REPLACE VIEW escrow_coverage AS
SELECT c.escrow_id, s.epoch_id, c.source_id, c.lo, c.hi
FROM raw_diff_coverage c LEFT JOIN raw_sessions s USING (escrow_id);

CREATE OR REPLACE VIEW diff_forks AS
SELECT f.epoch_id, f.escrow_id, f.nonce, f.digest, f.source_id, f.created_at,
       f.digest = min(f.digest) OVER (PARTITION BY f.escrow_id, f.nonce) AS replayed
FROM raw_diff_forks f;

CREATE OR REPLACE VIEW forked_diffs AS
SELECT f.epoch_id, f.escrow_id, f.nonce, count(DISTINCT f.digest) AS versions,
       list(DISTINCT f.source_id ORDER BY f.source_id) AS copies, min(f.digest) AS replayed_digest
FROM raw_diff_forks f
GROUP BY ALL;

-- Settlement quorum by distinct validators (docs/sources.md, inference lifecycle, settlement quorum): the chain's
-- quorum is DevshardQuorumFor(N) = floor(2N/3) + 1 signing slots, but the signed content (state root, escrow,
-- nonce) names no slot, so one validator holding many slots signs for all of them with one signature
-- (gonka-ai/gonka #1356). Per escrow, at its highest signed nonce (the state it was settled or finalised on):
-- signing slots, distinct signer addresses (slot -> address from the group), the quorum, and whether the slot
-- quorum was met by fewer distinct validators than it.
CREATE OR REPLACE VIEW escrow_signers AS
WITH last AS (SELECT escrow_id, max(nonce) AS nonce FROM raw_signature_digests GROUP BY escrow_id),
s AS (
  SELECT d.escrow_id, d.nonce, count(DISTINCT d.slot_id) AS signing_slots,
         count(DISTINCT g.address) AS distinct_signers,
         count(*) FILTER (WHERE g.address IS NULL) AS unknown_slots
  FROM raw_signature_digests d JOIN last USING (escrow_id, nonce)
  LEFT JOIN d_escrow_slots g ON g.escrow_id = d.escrow_id AND g.slot_id = d.slot_id
  GROUP BY ALL
)
SELECT e.epoch_id, s.escrow_id, s.nonce, e.status, e.group_size, s.signing_slots, s.distinct_signers,
       (SELECT count(DISTINCT a.address) FROM d_escrow_slots a WHERE a.escrow_id = s.escrow_id) AS group_validators,
       (2 * e.group_size) // 3 + 1 AS quorum,
       s.signing_slots >= (2 * e.group_size) // 3 + 1 AS slot_quorum_met,
       s.unknown_slots = 0 AND s.distinct_signers < (2 * e.group_size) // 3 + 1 AS below_distinct_quorum
FROM s JOIN d_escrows e USING (escrow_id);

COMMENT ON VIEW escrow_coverage IS 'Per escrow and source (copy lineage): the nonce ranges [lo, hi] of the escrow''s diff log that the source''s copies held. Ranges of all sources together, and what no copy held, are the escrows view''s held_ranges and missing_ranges.';
COMMENT ON VIEW forked_diffs IS 'One row per forked diff (escrow_id, nonce): versions = distinct byte versions (sha256 of txs_proto) the copies hold there, copies = the source ids holding them, replayed_digest = the version the replay uses (the digest that sorts first). The rows of each version and copy are in diff_forks; `network ingest` names each fork in its output.';
COMMENT ON VIEW diff_forks IS 'Diffs that two copies hold with different bytes at one (escrow_id, nonce): one row per version (digest = sha256 of txs_proto) and copy holding it (the copy that stored a version, and every copy read after the fork was found). replayed = the version the replay uses: the one whose digest sorts first, whatever order the copies came in. Each copy''s version is also a quarantine row under its source; the escrow is conflicted in escrows.';

COMMENT ON VIEW escrow_signers IS 'Per escrow, the host signatures at its highest signed nonce (the state it was settled or finalised on): signing_slots, distinct_signers (addresses of those slots in the group), group_validators (distinct addresses in the group), quorum = floor(2 group_size / 3) + 1 (the chain''s DevshardQuorumFor, counted in slots), slot_quorum_met, and below_distinct_quorum = the signatures come from fewer distinct validators than the quorum (one validator''s signature counts for every slot it holds: gonka-ai/gonka #1356) (false while a signing slot''s address is unknown).';
