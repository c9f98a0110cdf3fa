-- Public views over engine/validator logs, /metrics scrapes and PoC results (docs/data-model.md, logs, metrics and PoC results).
-- Build columns: as-of join of host_builds_t on the row's time, as in 00_core.sql.

-- Counter increases between consecutive scrapes of one series; a decrease is a counter reset
-- (restart), after which the increase is the new value itself.
CREATE OR REPLACE VIEW metric_increases AS
WITH s AS (
  SELECT host, scraped_at, family, engine, model_name, position, value,
         lag(value) OVER w AS prev_value, lag(scraped_at) OVER w AS prev_at
  FROM metric_samples
  WHERE family LIKE '%\_total' ESCAPE '\'
  WINDOW w AS (PARTITION BY host, family, engine, model_name, position ORDER BY scraped_at)
)
SELECT host, scraped_at AS "at", prev_at, family, engine, model_name, position,
       CASE WHEN value >= prev_value THEN value - prev_value ELSE value END AS increase,
       value < prev_value AS reset
FROM s WHERE prev_value IS NOT NULL;

CREATE OR REPLACE VIEW spec_decode_windows AS
-- V0 `Speculative metrics:` lines count since the engine started: a window is the increase since the
-- previous line of the same engine lifetime (log file and start cycle); a decrease is a restart whose
-- start line is missing, after which the counts are the window itself (as in metric_increases).
WITH v0 AS (
  SELECT s.host, s."at", s.record_key, s.accepted, s.drafted, s.drafts,
         lag(s.accepted) OVER w AS p_accepted, lag(s.drafted) OVER w AS p_drafted, lag(s.drafts) OVER w AS p_drafts
  FROM log_spec_decode s
  ASOF LEFT JOIN (SELECT host, file_id, line FROM log_engine_events WHERE kind = 'start') st
    ON st.host = s.host AND st.file_id = s.file_id AND s.line >= st.line
  WHERE s.cumulative
  WINDOW w AS (PARTITION BY s.host, s.file_id, st.line ORDER BY s.line)
),
v0_windows AS (
  SELECT host, "at", record_key,
         CASE WHEN reset THEN accepted ELSE accepted - p_accepted END AS accepted,
         CASE WHEN reset THEN drafted ELSE drafted - p_drafted END AS drafted,
         CASE WHEN reset THEN drafts ELSE drafts - p_drafts END AS drafts
  FROM (SELECT *, p_accepted IS NULL OR accepted < p_accepted OR drafted < p_drafted AS reset FROM v0)
),
log_windows AS (
  SELECT l.host, l."at", coalesce(v.accepted, l.accepted) AS accepted, coalesce(v.drafted, l.drafted) AS drafted,
         CASE WHEN l.cumulative THEN v.drafts ELSE l.drafts END AS drafts, l.per_position,
         CASE WHEN l.cumulative THEN CASE WHEN v.drafts > 0 THEN 1 + v.accepted / v.drafts END
              WHEN l.drafts > 0 THEN 1 + l.accepted / l.drafts
              WHEN l.mal_semantics = 'no_plus1' THEN l.mal_printed + 1 ELSE l.mal_printed END AS mean_acceptance_length,
         'log' AS source, l.mal_printed, l.mal_semantics, NULL::VARCHAR AS engine, l.record_key
  FROM log_spec_decode l LEFT JOIN v0_windows v ON l.cumulative AND v.host = l.host AND v.record_key = l.record_key
),
inc AS (
  SELECT host, "at", engine, model_name,
         sum(increase) FILTER (family = 'vllm:spec_decode_num_accepted_tokens_total')::BIGINT AS accepted,
         sum(increase) FILTER (family = 'vllm:spec_decode_num_draft_tokens_total')::BIGINT AS drafted,
         sum(increase) FILTER (family = 'vllm:spec_decode_num_drafts_total')::BIGINT AS drafts,
         list(increase ORDER BY TRY_CAST(position AS INTEGER))
           FILTER (family = 'vllm:spec_decode_num_accepted_tokens_per_pos_total') AS per_pos_counts
  FROM metric_increases GROUP BY ALL
),
metric_windows AS (
  SELECT host, "at", accepted, drafted, drafts,
         list_transform(per_pos_counts, lambda c: c / drafts) AS per_position,
         1 + accepted / drafts AS mean_acceptance_length, 'metrics' AS source, NULL::DOUBLE AS mal_printed,
         'plus1' AS mal_semantics, engine, NULL::VARCHAR AS record_key
  FROM inc WHERE drafts > 0
),
w AS (SELECT * FROM log_windows UNION ALL BY NAME SELECT * FROM metric_windows)
SELECT w.host, w."at", w.accepted, w.drafted, w.drafts, w.per_position, w.mean_acceptance_length,
       CASE WHEN b.valid_to IS NULL OR w."at" < b.valid_to THEN b.build END AS build,
       w.source, w.mal_printed, w.mal_semantics, w.engine, w.record_key
FROM w ASOF LEFT JOIN host_builds_t b ON b.host = w.host AND w."at" >= b.valid_from;

CREATE OR REPLACE VIEW engine_stats AS
WITH log_stats AS (
  SELECT host, "at", running, waiting, preemptions, kv_cache_usage, prompt_tps, generation_tps, engine,
         'log' AS source, level, record_key
  FROM log_engine_stats
),
gauges AS (
  SELECT host, scraped_at AS "at", engine,
         max(value) FILTER (family = 'vllm:num_requests_running')::BIGINT AS running,
         max(value) FILTER (family = 'vllm:num_requests_waiting')::BIGINT AS waiting,
         max(value) FILTER (family = 'vllm:kv_cache_usage_perc') AS kv_cache_usage
  FROM metric_samples GROUP BY ALL
),
metric_stats AS (
  SELECT g.host, g."at", g.running, g.waiting, p.increase::BIGINT AS preemptions, g.kv_cache_usage,
         NULL::DOUBLE AS prompt_tps, NULL::DOUBLE AS generation_tps, g.engine, 'metrics' AS source,
         NULL::VARCHAR AS level, NULL::VARCHAR AS record_key
  FROM gauges g
  LEFT JOIN (SELECT host, "at", engine, sum(increase) AS increase FROM metric_increases
             WHERE family = 'vllm:num_preemptions_total' GROUP BY ALL) p
    ON p.host = g.host AND p."at" = g."at" AND p.engine = g.engine
),
s AS (SELECT * FROM log_stats UNION ALL BY NAME SELECT * FROM metric_stats)
SELECT s.host, s."at", s.running, s.waiting, s.preemptions, s.kv_cache_usage, s.prompt_tps, s.generation_tps,
       CASE WHEN b.valid_to IS NULL OR s."at" < b.valid_to THEN b.build END AS build,
       s.engine, s.source, s.level, s.record_key
FROM s ASOF LEFT JOIN host_builds_t b ON b.host = s.host AND s."at" >= b.valid_from;

-- Engine cycles (restarts by launch; docs/sources.md, vLLM logs, engine events). A cycle begins at the server's
-- launch: its version line or logo (`launch`), or the engine's start line (`start`) when no launch or
-- start line comes right before it. Every data-parallel engine core prints its own start line, so the start lines
-- after one launch (or after each other) are one cycle; a second launch in the same file is a new cycle even when
-- the same engine name follows. A `ready` right after a death signal begins a cycle too (the server came back,
-- its launch and start lines are missing). cycle_start marks the event that begins a cycle; cycle numbers the
-- cycles of a file (0: the events before its first cycle start, a file that begins mid-run).
CREATE OR REPLACE VIEW engine_events AS
WITH o AS (
  -- a launch or start record whose traceback ends the engine (a start that fails at once) holds both events:
  -- the cycle begins first
  SELECT *, CASE kind WHEN 'launch' THEN 0 WHEN 'start' THEN 1 ELSE 2 END AS kind_order FROM log_engine_events
),
e AS (
  SELECT *, last_value(CASE WHEN kind IN ('launch', 'start', 'ready', 'fatal', 'engine_dead', 'oom', 'worker_died')
                            THEN kind END
                       IGNORE NULLS) OVER (PARTITION BY host, file_id ORDER BY line, kind_order, kind
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_kind
  FROM o
),
c AS (
  SELECT *, CASE kind WHEN 'launch' THEN true
                      WHEN 'start' THEN prev_kind IS NULL OR prev_kind NOT IN ('launch', 'start')
                      WHEN 'ready' THEN coalesce(prev_kind IN ('fatal', 'engine_dead', 'oom', 'worker_died'), false)
                      ELSE false END AS cycle_start
  FROM e
)
SELECT c.host, c."at", c.kind, c.detail,
       CASE WHEN b.valid_to IS NULL OR c."at" < b.valid_to THEN b.build END AS build,
       c.record_key, c.level, c.proc, c.file_id, c.line, c.cycle_start,
       sum(CASE WHEN c.cycle_start THEN 1 ELSE 0 END)
         OVER (PARTITION BY c.host, c.file_id ORDER BY c.line, c.kind_order, c.kind ROWS UNBOUNDED PRECEDING)::BIGINT
         AS cycle
FROM c
ASOF LEFT JOIN host_builds_t b ON b.host = c.host AND c."at" >= b.valid_from;

-- One row per engine death (docs/sources.md, vLLM logs, engine deaths). A crash is reported several
-- times: by the engine core (`fatal`, its OOM), by the API server a moment later under another pid
-- (`engine_dead`), by the worker that died first (`worker_died`), by every data-parallel engine, and
-- (V0, or with VLLM_KEEP_ALIVE_ON_ENGINE_DEATH) by each later request. The death signals of one engine cycle
-- (engine_events.cycle, above) are one death; it is an OOM when any of them is one. A worker death alone is a
-- death too: the executor shuts down after it (docs/sources.md lists it among the death signals), even when
-- the log ends before the engine says so.
CREATE OR REPLACE VIEW engine_deaths AS
WITH d AS (
  SELECT host, file_id, cycle, min("at") AS "at", min(line) AS line, arg_min(record_key, line) AS record_key,
         arg_min(proc, line) AS proc, bool_or(kind = 'oom') AS oom,
         list(DISTINCT kind ORDER BY kind) AS kinds, count(DISTINCT record_key) AS records,
         coalesce(arg_min(detail, line) FILTER (kind = 'oom'), arg_min(detail, line) FILTER (kind = 'fatal'),
                  arg_min(detail, line)) AS detail
  FROM engine_events
  WHERE kind IN ('fatal', 'engine_dead', 'oom', 'worker_died')
  GROUP BY host, file_id, cycle
)
SELECT d.host, d."at", d.oom, d.kinds, d.records, d.detail,
       CASE WHEN b.valid_to IS NULL OR d."at" < b.valid_to THEN b.build END AS build,
       d.record_key, d.proc, d.file_id, d.line
FROM d ASOF LEFT JOIN host_builds_t b ON b.host = d.host AND d."at" >= b.valid_from;

-- The draft block size of DSpark checkpoints (docs/sources.md, vLLM logs, DSpark): vLLM refuses fewer speculative
-- tokens than the block (vllm-project/vllm #47419), and more was reported to collapse acceptance on the 0731
-- checkpoint (vllm-project/vllm #41834); unknown models stay NULL. The block size is in the checkpoint's config,
-- not in the logs. DeepSeek-V4-Flash's DSpark draft is the 0731 checkpoint (block 5; the seed evidence,
-- gonka-ai/gonka#2198 item 6, sets K to it), and start lines name the served model, so the pattern is the model's.
CREATE OR REPLACE VIEW dspark_block_sizes AS
SELECT * FROM (VALUES ('DeepSeek-V4-Flash', 5), ('dspark_qwen3_8b_block7', 7)) AS t(model_pattern, block_size);

-- The one lookup of a start cycle's DSpark block size (acceptance's block_size, preflight's speculative check).
CREATE OR REPLACE MACRO dspark_block_size(model_) AS
  (SELECT max(d.block_size) FROM dspark_block_sizes d WHERE model_ ILIKE '%' || d.model_pattern || '%');

CREATE OR REPLACE VIEW validation_scores AS
WITH s AS (
  SELECT v.*, i.executor AS inference_executor, i.model AS inference_model
  FROM log_validation_scores v
  LEFT JOIN inferences i ON v.escrow_id IS NOT NULL AND i.escrow_id = v.escrow_id
                        AND i.inference_id::VARCHAR = v.inference_id
),
t AS (
  SELECT s.*, coalesce(s.executor, s.inference_executor) AS executor_addr,
         coalesce(s.threshold, s.known.value::DOUBLE) AS threshold_used,
         CASE WHEN s.threshold IS NOT NULL THEN 'log line' ELSE s.known.source END AS threshold_source,
         CASE WHEN s.threshold IS NOT NULL THEN false ELSE s.known.assumed END AS threshold_assumed
  FROM (
    -- the chain's threshold for the line's model at its time (model_validation_thresholds' rows)
    SELECT s.*, chain_value_of('validation_threshold', coalesce(s.model, s.inference_model), s."at") AS known
    FROM s
  ) s
),
vb AS (
  SELECT t.*, CASE WHEN b.valid_to IS NULL OR t."at" < b.valid_to THEN b.build END AS validator_build
  FROM t ASOF LEFT JOIN host_builds_t b ON b.host = t.validator AND t."at" >= b.valid_from
)
SELECT vb.validator, vb."at", vb.escrow_id, vb.inference_id, vb.value, vb.threshold_used AS threshold,
       vb.value > vb.threshold_used AS passed, vb.executor_addr AS executor, vb.validator_build,
       CASE WHEN b.valid_to IS NULL OR vb."at" < b.valid_to THEN b.build END AS executor_build,
       vb.result, coalesce(vb.model, vb.inference_model) AS model, vb.record_key, vb.reason,
       vb.threshold_source, vb.threshold_assumed
FROM vb ASOF LEFT JOIN host_builds_t b ON b.host = vb.executor_addr AND vb."at" >= b.valid_from;

-- Each invalid sampled validation (validations, kind validation) with the reason its validator's log names: the
-- validator's latest rejection line (result rejected, or an invalid result with a reason) for the same inference id
-- at or before the verdict and at most an hour earlier. Devshard lines carry the inference id but no escrow id,
-- so a line with an escrow id must match it; one without matches by validator, inference id and time.
CREATE OR REPLACE VIEW validation_rejections AS
WITH r AS (
  SELECT validator, inference_id, escrow_id, "at", reason, result
  FROM log_validation_scores WHERE reason IS NOT NULL AND result IN ('rejected', 'invalid')
)
SELECT v.epoch_id, v.escrow_id, v.inference_id, v.validator, v.nonce, v.event_at, v.executor,
       (SELECT r.reason FROM r WHERE r.validator = v.validator AND r.inference_id = v.inference_id::VARCHAR
          AND (r.escrow_id IS NULL OR r.escrow_id = v.escrow_id)
          AND r."at" <= v.event_at AND r."at" > v.event_at - INTERVAL 1 HOUR
        ORDER BY r."at" DESC, r.reason LIMIT 1) AS reason
FROM validations v
WHERE v.kind = 'validation' AND NOT v.valid;

CREATE OR REPLACE VIEW poc_results AS
SELECT host, "at", event, validator, participant, model, request_id, n_total, n_mismatch, p_value, p_mismatch, cutoff,
       fraud, params_source, dist_threshold, reported_p_value, reported_fraud,
       reported_fraud IS NOT NULL AND reported_fraud <> fraud AS reported_disagrees, result_key, file
FROM poc_results_t;

COMMENT ON VIEW metric_increases IS 'Increase of every vLLM /metrics counter between consecutive scrapes of the same series (host, family, engine, model_name, position); reset = the counter went down (restart), in which case the increase is the new value.';
COMMENT ON VIEW spec_decode_windows IS 'One row per speculative-decoding window: a SpecDecoding metrics log line (source log; drafts recovered as accepted/(MAL-1), or accepted/MAL for the 0.8.5 line), a V0 Speculative metrics line (counts since the engine started: the increase since the previous line of the same engine lifetime; drafts = drafted/K) or the counter increases between two /metrics scrapes (source metrics; exact drafts). mean_acceptance_length is always 1 + accepted/drafts (0.8.5 normalised). per_position = K per-position acceptance rates. Aggregate by summing accepted, drafted, drafts; never average MALs. build from an as-of join of host_builds on at.';
COMMENT ON VIEW engine_stats IS 'Periodic engine stats: vLLM stats log lines (source log) and /metrics gauges (source metrics). preemptions = the line''s Preemptions: N (0 when absent on vLLM >= 0.11.1, NULL = unknown on earlier V1) or the counter increase since the previous scrape; kv_cache_usage is a fraction 0..1. Lines logged at DEBUG when idle are kept when present (level).';
COMMENT ON VIEW engine_events IS 'Engine events from vLLM logs, one per record (tracebacks folded in): kind in fatal (the engine core''s last words: EngineCore fatal error, failed start, or 0.8''s EngineCore hit an exception), engine_dead (the front end or launcher says the engine is gone), worker_died, oom (an out-of-memory error; a fatal record whose traceback is an OOM has both rows with the same record_key) (death and OOM texts: the catalogue derived from vLLM''s source, pipeline/sources/logs/vllm_catalogue.toml), launch (the API server''s vLLM API server version line, or from 0.15 its logo; detail = version), start (Initializing an LLM engine; detail = version), ready (Application startup complete.), shutdown (the API server''s Shutting down FastAPI HTTP server., from vLLM 0.23 (vllm-project/vllm #43707) [shutdown] API server: shutting down FastAPI HTTP server), poc_start, poc_stop, config_error (a folded traceback whose exception line names the speculative config: a start vLLM refused; not a death). cycle_start = the event begins an engine cycle (a launch; a start with no launch or start right before it, so data-parallel engines of one launch are one cycle; a ready right after a death signal); cycle = the number of cycle starts at or before the event in its file (0 = before the first: a file that begins mid-run).';
COMMENT ON VIEW engine_deaths IS 'One row per engine death in vLLM logs: the death signals (fatal, engine_dead, oom, worker_died events) of one engine cycle of a log file (engine_events.cycle) are one death (the engine core, the API server under another pid, every data-parallel engine and later requests all report the same crash); at = the first signal, oom = any signal is an out-of-memory error, kinds = the signal kinds, records = the records that reported it, detail = the OOM text, else the fatal record''s. A worker death alone is a death (the executor shuts down after it).';
COMMENT ON VIEW validation_scores IS 'Per-validation similarity values from validator (dapi) logs: value = cosineSimValue (the logprob similarity), 0 for different-length/different-tokens/invalid results. threshold = the line''s own, else the model''s validation threshold in chain_params at the line''s time (model_validation_thresholds); threshold_source = log line or that chain row''s source; threshold_assumed = the threshold is a default of this release (true), the line''s own or a [[chain]] entry (false), NULL when there is none; passed = value > threshold (strictly; NULL when the threshold is unknown). executor from the line or the inference (escrow_id + inference_id). Builds from as-of joins of host_builds on at. Rejection lines (docs/sources.md, validator logs) are rows without a value: result rejected (validation failed: …, or a short-output check failed) or log_only (a check that would fail, logged only: no verdict), with their reason; an invalid result keeps its reason where the line names one.';
COMMENT ON VIEW validation_rejections IS 'Every invalid sampled validation (validations, kind validation, valid false) with the reason the validator''s log names (validation_scores.reason of its latest rejected or invalid line for the same validator and inference id, at or before the verdict and within an hour; the escrow must match where the line names one); NULL when no log line names one (no validator log ingested, or a failed similarity, which the devshard path does not log).';
COMMENT ON VIEW poc_results IS 'PoC validation results (JSON responses, golden-vector reports): p_value recomputed as the one-sided exact binomial P(X >= n_mismatch), X ~ Binomial(n_total, p_mismatch); fraud = p_value < cutoff; p_mismatch, cutoff and where they came from (params_source) recorded; reported_disagrees = the result''s own fraud_detected differs.';
COMMENT ON VIEW dspark_block_sizes IS 'Known draft block size (dspark_block_size) of DSpark checkpoints by model name; the acceptance table flags a DSpark build whose per-position list is not this long.';
