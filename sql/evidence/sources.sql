-- Sources of the warehouse for provenance footers: per source, its latest successful run
-- (kind, label, copy time, input digest) and the ids of all its successful runs, oldest first: in run
-- order ({run_order}: run_seq, see pipeline/warehouse/database.py), never by the wall clock alone, which
-- may have been set back between two runs.
-- Every successful run is listed because history accumulates: a later copy may have
-- pruned epochs that only an earlier run brought in (history accumulates in the warehouse).
SELECT source_id,
       arg_max(source_kind, ({run_order}, started_at)) AS source_kind,
       arg_max(label, ({run_order}, started_at)) FILTER (label IS NOT NULL) AS label,
       arg_max(copy_at, ({run_order}, started_at)) AS copy_at,
       arg_max(input_digest, ({run_order}, started_at)) AS input_digest,
       list(run_id ORDER BY {run_order}, started_at, run_id) AS run_ids,
       max(started_at) AS last_started_at
FROM ingest_runs
WHERE status = 'ok'
GROUP BY source_id
ORDER BY min(({run_order}, started_at)), source_id
