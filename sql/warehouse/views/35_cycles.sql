-- Start cycles of a host's vLLM logs and what their start lines state (docs/sources.md, start-up).

-- Where a start cycle begins (engine_events.cycle_start), and the one definition of a restart: a cycle begun
-- after the host's logs already show the engine, that is after any engine event (a shutdown included), stats
-- or spec-decode line of the host that is earlier in time, or earlier in the same file. engine_cycles,
-- stability and timeline read cycle starts and restarts only from here.
CREATE OR REPLACE VIEW engine_cycle_starts AS
WITH seen AS (
  SELECT host, file_id, "at", line FROM log_engine_events
  UNION ALL SELECT host, file_id, "at", line FROM log_engine_stats
  UNION ALL SELECT host, file_id, "at", line FROM log_spec_decode
),
first_host AS (SELECT host, min("at") AS first_at FROM seen GROUP BY host),
first_file AS (SELECT host, file_id, min(line) AS first_line FROM seen GROUP BY host, file_id)
SELECT e.host, e.file_id, e.line, e."at", e.record_key,
       coalesce(e."at" > h.first_at OR e.line > f.first_line, false) AS restart
FROM engine_events e
LEFT JOIN first_host h ON h.host = e.host
LEFT JOIN first_file f ON f.host = e.host AND f.file_id = e.file_id
WHERE e.cycle_start;

CREATE OR REPLACE VIEW engine_cycles AS
WITH s AS (
  SELECT c.*, lead(c."at") OVER w AS next_at, lead(c.line) OVER w AS next_line
  FROM engine_cycle_starts c
  WINDOW w AS (PARTITION BY c.host, c.file_id ORDER BY c.line)
),
-- the API server prints its version and non-default args (parts server, args) before the engine's start
-- line: they belong to the cycle of the next engine start line (whichever line the cycle rule starts the
-- cycle at, that start's cycle is the latest cycle start at or before it) — unless another cycle starts
-- before that start line, or none follows: a launch that never started its engine (vLLM refused the
-- configuration) keeps its own lines; every other line belongs to the cycle it follows
next_start AS (
  SELECT f.*, st.line AS start_line
  FROM (SELECT * FROM log_start_facts WHERE part IN ('server', 'args')) f
  ASOF LEFT JOIN (SELECT host, file_id, line FROM log_engine_events WHERE kind = 'start') st
    ON st.host = f.host AND st.file_id = f.file_id AND f.line < st.line
),
anchored AS (
  SELECT f.* EXCLUDE (start_line),
         CASE WHEN f.start_line IS NULL OR nc.line < f.start_line THEN f.line ELSE f.start_line END AS anchor
  FROM next_start f
  ASOF LEFT JOIN engine_cycle_starts nc ON nc.host = f.host AND nc.file_id = f.file_id AND f.line < nc.line
),
before AS (
  SELECT f.* EXCLUDE (anchor), pv.line AS cycle_line
  FROM anchored f
  ASOF JOIN engine_cycle_starts pv ON pv.host = f.host AND pv.file_id = f.file_id AND f.anchor >= pv.line
),
after AS (
  SELECT f.*, pv.line AS cycle_line
  FROM (SELECT * FROM log_start_facts WHERE part NOT IN ('server', 'args')) f
  ASOF JOIN engine_cycle_starts pv ON pv.host = f.host AND pv.file_id = f.file_id AND f.line >= pv.line
),
facts AS (SELECT * FROM before UNION ALL BY NAME SELECT * FROM after),
-- one value per key and cycle: the latest line's (the engine's config line restates the arguments)
kv AS (
  SELECT host, file_id, cycle_line, part = 'startup' AS startup, key, arg_max(value, line) AS value,
         min(line) AS line
  FROM facts GROUP BY ALL
),
config AS (
  SELECT host, file_id, cycle_line,
         to_json(map(list(key ORDER BY key) FILTER (NOT startup), list(value ORDER BY key) FILTER (NOT startup)))
           AS config,
         any_value(value) FILTER (key = 'vllm_version') AS vllm_version,
         max(TRY_CAST(value AS DOUBLE)) FILTER (key = 'model_load_gib') AS model_load_gib,
         max(TRY_CAST(value AS DOUBLE)) FILTER (key = 'model_load_s') AS model_load_s,
         min(TRY_CAST(value AS DOUBLE)) FILTER (key = 'kv_cache_gib') AS kv_cache_gib,
         min(TRY_CAST(value AS BIGINT)) FILTER (key = 'kv_cache_tokens') AS kv_cache_tokens,
         min(TRY_CAST(value AS DOUBLE)) FILTER (key = 'max_concurrency') AS max_concurrency,
         -- the runner: V2 where a worker printed `Using V2 Model Runner`, V1 where the cycle loaded its model
         -- without that line (the worker chooses its runner before it loads the model), else not stated
         CASE WHEN bool_or(key = 'model_runner') THEN 'V2' WHEN bool_or(key = 'model_load_s') THEN 'V1' END
           AS model_runner,
         any_value(TRY_CAST(value AS BIGINT)) FILTER (key = 'poc_batch_size') AS poc_batch_size
  FROM kv GROUP BY ALL
),
lines AS (
  SELECT host, file_id, cycle_line, list(DISTINCT file_id || ':' || line ORDER BY file_id || ':' || line) AS lines
  FROM facts WHERE part <> 'startup' GROUP BY ALL
),
poc AS (
  SELECT host, file_id, cycle_line,
         sum(TRY_CAST(value AS DOUBLE)) FILTER (key = 'poc_nonces') AS nonces,
         sum(TRY_CAST(value AS DOUBLE)) FILTER (key = 'poc_minutes') AS minutes
  FROM facts WHERE key IN ('poc_nonces', 'poc_minutes') GROUP BY ALL
),
ready AS (
  SELECT s.host, s.file_id, s.line, min(e."at") AS ready_at
  FROM s JOIN log_engine_events e ON e.host = s.host AND e.file_id = s.file_id AND e.kind = 'ready'
    AND e.line > s.line AND (s.next_line IS NULL OR e.line < s.next_line)
  GROUP BY ALL
),
files AS (SELECT host, file_id, max(last_at) AS last_at FROM log_files GROUP BY ALL)
SELECT s.host, s."at" AS started_at, coalesce(s.next_at, f.last_at) AS ended_at,
       coalesce(c.vllm_version, regexp_extract(e.detail, 'vLLM (\S+)', 1)) AS vllm_version,
       substr(md5(coalesce(c.config::VARCHAR, '{}')), 1, 12) AS fingerprint,
       coalesce(c.config, '{}'::JSON) AS config,
       s.record_key, s.file_id, s.line, coalesce(l.lines, []) AS lines,
       r.ready_at, epoch(r.ready_at - s."at") AS time_to_ready_s,
       c.model_load_gib, c.model_load_s, c.kv_cache_gib, c.kv_cache_tokens, c.max_concurrency,
       CASE WHEN p.minutes > 0 THEN p.nonces / p.minutes END AS poc_nonces_per_min,
       c.poc_batch_size, c.model_runner
FROM s
LEFT JOIN config c ON c.host = s.host AND c.file_id = s.file_id AND c.cycle_line = s.line
LEFT JOIN lines l ON l.host = s.host AND l.file_id = s.file_id AND l.cycle_line = s.line
LEFT JOIN poc p ON p.host = s.host AND p.file_id = s.file_id AND p.cycle_line = s.line
LEFT JOIN ready r ON r.host = s.host AND r.file_id = s.file_id AND r.line = s.line
LEFT JOIN files f ON f.host = s.host AND f.file_id = s.file_id
LEFT JOIN log_engine_events e ON e.host = s.host AND e.record_key = s.record_key AND e.kind = 'start';

COMMENT ON VIEW engine_cycle_starts IS 'Where each start cycle of a host''s vLLM logs begins (the first start event of a launch, engine_events.cycle_start), and the one definition of a restart that engine_cycles, stability and timeline build on: restart = the cycle begins after the host''s logs already show the engine (an engine event, a shutdown line included, or a stats or spec-decode line earlier in time, or earlier in the same file).';
COMMENT ON VIEW engine_cycles IS 'One row per start cycle of a host''s vLLM logs: started_at (its start line), ended_at (the next cycle''s start in the same file, else the file''s last record), vllm_version, config = JSON of what the start lines state (version, model, spec_method and spec_tokens, parallel sizes, quantization, kv_cache_dtype, the non-default arguments; keys sorted), fingerprint = the first 12 hex digits of md5(config): consecutive cycles with one fingerprint are one build segment. lines = the record keys (file_id:line) of the lines the config rests on. Start-up facts: ready_at and time_to_ready_s (to Application startup complete.), model_load_gib and model_load_s, kv_cache_gib (available KV cache memory, the smallest worker), kv_cache_tokens (GPU KV cache size), max_concurrency (at the printed tokens per request), poc_nonces_per_min (PoC stopped lines: nonces / minutes), poc_batch_size (the batch_size of its last PoC /init/generate or PoC /generate line), model_runner (V2 where a worker printed Using V2 Model Runner, V1 where the model loaded without it, NULL when neither is logged).';

-- A host's start cycles begun in [since_, until_) (NULL: unbounded), each with the build in effect at its start
-- (as-of join of the build timeline; 'unattributed' outside it): what the startup, preflight and spec tables read.
CREATE OR REPLACE MACRO host_build_cycles(host_, since_, until_) AS TABLE
SELECT c.*, coalesce(CASE WHEN b.valid_to IS NULL OR c.started_at < b.valid_to THEN b.build END,
                     'unattributed') AS build
FROM engine_cycles c
ASOF LEFT JOIN host_builds_t b ON b.host = c.host AND c.started_at >= b.valid_from
WHERE c.host = host_
  AND (since_::TIMESTAMPTZ IS NULL OR c.started_at >= since_)
  AND (until_::TIMESTAMPTZ IS NULL OR c.started_at < until_);
