-- What the host's start cycles state of speculative decoding, with the build at each cycle's start and the known
-- DSpark draft block size of its model (dspark_block_sizes; NULL when unknown or not DSpark).
-- params: $host
WITH c AS (
  SELECT c.started_at, c.config->>'spec_method' AS spec_method, TRY_CAST(c.config->>'spec_tokens' AS BIGINT) AS spec_tokens,
         coalesce(c.config->>'model', c.config->>'served_model_name', c.config->>'model_tag') AS model
  FROM engine_cycles c WHERE c.host = $host
)
SELECT coalesce(CASE WHEN b.valid_to IS NULL OR c.started_at < b.valid_to THEN b.build END, 'unattributed') AS build,
       c.spec_method, c.spec_tokens, c.model,
       CASE WHEN c.spec_method = 'dspark' THEN
         (SELECT max(d.block_size) FROM dspark_block_sizes d WHERE c.model ILIKE '%' || d.model_pattern || '%') END
         AS block_size
FROM c ASOF LEFT JOIN host_builds_t b ON b.host = $host AND c.started_at >= b.valid_from
ORDER BY c.started_at
