-- Where the tracker and session storage disagree, for the participants and epochs shown.
-- params: $host (NULL = every participant), $epochs (list of epochs; NULL = all)
SELECT *
FROM tracker_disagreements
WHERE ($host::VARCHAR IS NULL OR participant = $host)
  AND ($epochs::BIGINT[] IS NULL OR list_contains($epochs::BIGINT[], epoch_id))
ORDER BY ALL
