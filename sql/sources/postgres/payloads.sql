-- Stored payloads (docs/sources.md, Payloads), read through the partitioned parent.
SELECT epoch_id::bigint AS epoch_id, escrow_id, inference_id::bigint AS inference_id, prompt_payload, response_payload
FROM payload_storage
