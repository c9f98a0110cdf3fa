-- Spec-decode windows of the host in the window, with the build label (NULL build → 'unattributed').
-- params: $host, $since, $until (NULL = unbounded)
SELECT coalesce(build, 'unattributed') AS build, "at", source, accepted, drafted, drafts, per_position
FROM spec_decode_windows
WHERE host = $host
  AND ($since::TIMESTAMPTZ IS NULL OR "at" >= $since)
  AND ($until::TIMESTAMPTZ IS NULL OR "at" < $until)
ORDER BY "at"
