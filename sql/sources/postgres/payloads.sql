-- Stored payloads (docs/sources.md, Payloads), read through the partitioned parent. A row whose bodies
-- together exceed $1 bytes (MAX_PAYLOAD_FILE_BYTES) comes without them: octet_length reads a TOASTed
-- value's stored size, not its bytes, so an oversized answer is set aside without being read.
SELECT epoch_id::bigint AS epoch_id, escrow_id, inference_id::bigint AS inference_id,
       CASE WHEN payload_bytes > $1 THEN NULL ELSE prompt_payload END AS prompt_payload,
       CASE WHEN payload_bytes > $1 THEN NULL ELSE response_payload END AS response_payload,
       payload_bytes
FROM (SELECT *, coalesce(octet_length(prompt_payload), 0)::bigint
                + coalesce(octet_length(response_payload), 0)::bigint AS payload_bytes
      FROM payload_storage) p
