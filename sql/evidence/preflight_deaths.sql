-- The host's engine deaths in the window for the preflight's memory check (view engine_deaths: one row per
-- crash), each with the longest prompt of the host's answers that started in the $near_s seconds before it
-- (the stored request's usage, else the finish transaction's input tokens).
-- params: $host, $since, $until (time bounds on the death, NULL = unbounded), $near_s
SELECT d."at", coalesce(d.build, 'unattributed') AS build, d.oom, d.record_key,
       (SELECT max(coalesce(a.prompt_tokens, i.input_tokens))
        FROM inferences i
        LEFT JOIN answer_checks_t a ON a.escrow_id = i.escrow_id AND a.inference_id = i.inference_id
        WHERE i.executor = $host
          AND i.started_at <= d."at" AND i.started_at >= d."at" - to_seconds($near_s::BIGINT)) AS prompt_tokens_near
FROM engine_deaths d
WHERE d.host = $host
  AND ($since::TIMESTAMPTZ IS NULL OR d."at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR d."at" < $until)
ORDER BY d."at", d.record_key
