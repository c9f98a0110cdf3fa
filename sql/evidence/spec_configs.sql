-- What the host's start cycles state of speculative decoding, with the build at each cycle's start and the known
-- DSpark draft block size of its model (dspark_block_sizes; NULL when unknown or not DSpark).
-- params: $host
WITH c AS (
  SELECT build, started_at, config->>'spec_method' AS spec_method, TRY_CAST(config->>'spec_tokens' AS BIGINT) AS spec_tokens,
         coalesce(config->>'model', config->>'served_model_name', config->>'model_tag') AS model
  FROM host_build_cycles($host, NULL, NULL)
)
SELECT c.build, c.spec_method, c.spec_tokens, c.model,
       CASE WHEN c.spec_method = 'dspark' THEN dspark_block_size(c.model) END AS block_size
FROM c
ORDER BY c.started_at
