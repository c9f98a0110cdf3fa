-- Engine throughput of the host per build from its vLLM stats log lines (one line = one window):
-- prompt and generation throughput over the busy windows (at least one running request and both
-- throughputs printed; an idle engine's 0 tokens/s says nothing about its speed), running and waiting
-- requests over every window. Quantiles are quantile_cont: linear interpolation between windows.
-- params: $host, $since, $until (the window's time bounds, NULL = unbounded)
WITH lines AS (
  SELECT coalesce(build, 'unattributed') AS build, prompt_tps, generation_tps, running, waiting,
         running > 0 AND prompt_tps IS NOT NULL AND generation_tps IS NOT NULL AS busy
  FROM engine_stats
  WHERE host = $host AND source = 'log'
    AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
    AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
)
SELECT build,
       count(*) AS windows,
       count(*) FILTER (busy) AS busy_windows,
       quantile_cont(generation_tps, 0.5) FILTER (busy) AS generation_tps_median,
       quantile_cont(generation_tps, 0.9) FILTER (busy) AS generation_tps_p90,
       quantile_cont(prompt_tps, 0.5) FILTER (busy) AS prompt_tps_median,
       quantile_cont(prompt_tps, 0.9) FILTER (busy) AS prompt_tps_p90,
       quantile_cont(running, 0.5) AS running_median,
       max(running) AS running_max,
       quantile_cont(waiting, 0.5) AS waiting_median,
       max(waiting) AS waiting_max
FROM lines
GROUP BY build
