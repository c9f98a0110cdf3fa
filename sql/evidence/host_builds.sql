-- The host's builds in the order they started; a label used twice appears once, at its first start.
-- params: $host
SELECT build, min(valid_from) AS valid_from
FROM host_builds
WHERE host = $host
GROUP BY build
ORDER BY valid_from, build
