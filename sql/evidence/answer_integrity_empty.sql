-- The host's empty answers in the window, each matched against the host's engine events (view engine_events).
-- Window: --epoch on the escrow's epoch, --since/--until on started_at (as answer_integrity.sql).
-- params: $host, $epoch, $since, $until, $tolerance_s, $cap_s
--
--   answer time  = [started_at - tolerance, greatest(started_at, confirmed_at, first finish tx event_at) + tolerance]
--                  (started_at: gateway clock; confirmed_at: executor clock; finish: diffs.created_at or the
--                  nonce clock; log times: the host's clock, whole seconds — the tolerance absorbs the skew)
--   engine death = from each fatal / engine_dead / oom / worker_died event of the host to the host's next
--                  ready event at or after it, at most cap after the death (no ready logged → death + cap)
--   PoC window   = from each poc_start of the host to its next poc_stop at or after it, at most cap
--   in_engine_death / in_poc = the answer time overlaps at least one such window (closed intervals);
--   in_vllm_logs = the answer time overlaps the span (first..last record) of an ingested vLLM log file of the host.
WITH a AS (
  SELECT c.epoch_id, c.escrow_id, c.inference_id, c.started_at, c.sse
  FROM answer_checks c
  WHERE c.executor = $host AND c.empty
    AND ($epoch::BIGINT IS NULL OR c.epoch_id = $epoch)
    AND ($since::TIMESTAMPTZ IS NULL OR c.started_at >= $since)
    AND ($until::TIMESTAMPTZ IS NULL OR c.started_at < $until)
),
ev AS (
  SELECT "at", kind FROM engine_events WHERE host = $host
),
deaths AS (
  SELECT d."at" AS w_from,
         -- least() skips NULL: without a later `ready` the window is just capped
         least((SELECT min(r."at") FROM ev r WHERE r.kind = 'ready' AND r."at" >= d."at"),
               d."at" + to_seconds($cap_s::BIGINT)) AS w_to
  FROM ev d
  WHERE d.kind IN ('fatal', 'engine_dead', 'oom', 'worker_died')
),
pocs AS (
  SELECT p."at" AS w_from,
         least((SELECT min(s."at") FROM ev s WHERE s.kind = 'poc_stop' AND s."at" >= p."at"),
               p."at" + to_seconds($cap_s::BIGINT)) AS w_to
  FROM ev p
  WHERE p.kind = 'poc_start'
),
finish AS (
  SELECT t.escrow_id, t.inference_id, min(t.event_at) AS finish_at
  FROM txs t
  WHERE t.kind = 'finish' AND t.escrow_id IN (SELECT escrow_id FROM a)
  GROUP BY ALL
),
e AS (
  SELECT a.epoch_id, a.escrow_id, a.inference_id, a.sse, a.started_at, i.confirmed_at, f.finish_at,
         a.started_at - to_seconds($tolerance_s::BIGINT) AS t_from,
         greatest(a.started_at, i.confirmed_at, f.finish_at) + to_seconds($tolerance_s::BIGINT) AS t_to
  FROM a
  LEFT JOIN inferences i ON i.escrow_id = a.escrow_id AND i.inference_id = a.inference_id
  LEFT JOIN finish f ON f.escrow_id = a.escrow_id AND f.inference_id = a.inference_id
)
SELECT e.epoch_id, e.escrow_id, e.inference_id, e.sse, e.started_at, e.confirmed_at, e.finish_at, e.t_from, e.t_to,
       coalesce(EXISTS (SELECT 1 FROM deaths d WHERE d.w_from <= e.t_to AND d.w_to >= e.t_from), false) AS in_engine_death,
       coalesce(EXISTS (SELECT 1 FROM pocs p WHERE p.w_from <= e.t_to AND p.w_to >= e.t_from), false) AS in_poc,
       coalesce(EXISTS (SELECT 1 FROM log_files l WHERE l.host = $host AND l.kind = 'vllm'
                                                   AND l.first_at <= e.t_to AND l.last_at >= e.t_from), false) AS in_vllm_logs
FROM e
ORDER BY e.started_at, e.escrow_id, e.inference_id
