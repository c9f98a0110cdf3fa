-- name: host_verdicts_by_epoch
-- description: Verdicts one host cast on other hosts' answers, per epoch and kind: valid, invalid, total, and the invalid share.
-- params: host (gonka1… address)
SELECT epoch_id, kind,
       count(*) FILTER (valid) AS valid,
       count(*) FILTER (NOT valid) AS invalid,
       count(*) AS total,
       round(count(*) FILTER (NOT valid) / count(*), 4) AS invalid_share
FROM validations
WHERE validator = $host AND executor <> $host
GROUP BY ALL
ORDER BY epoch_id, kind
