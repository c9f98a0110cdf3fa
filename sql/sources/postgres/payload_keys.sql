-- The keys of the stored payloads, without their bodies: what a re-ingest checks for new ones.
SELECT escrow_id, inference_id::bigint AS inference_id FROM payload_storage
