-- The host's build timeline: every entry with its window, in the order they started.
-- params: $host
SELECT build, valid_from, valid_to
FROM host_builds
WHERE host = $host
ORDER BY valid_from
