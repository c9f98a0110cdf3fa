-- The host's builds over a time span (an epoch's, as log-based evidence bounds it: log_window_bounds.sql), each
-- with the part of [since, until) it was in effect: where the index's build bands start and end inside an epoch.
-- params: $host, $since, $until
SELECT build, greatest(valid_from, $since) AS seg_from, least(coalesce(valid_to, $until), $until) AS seg_to
FROM host_builds
WHERE host = $host AND valid_from < $until AND (valid_to IS NULL OR valid_to > $since)
ORDER BY seg_from, build
