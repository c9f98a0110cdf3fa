-- Per escrow, the highest nonce one source (copy lineage) has already given: its diffs up to there
-- are not read again (a source's diffs are immutable); those above are.
-- params: $source_id
SELECT escrow_id, max(hi) AS cursor FROM raw_diff_coverage WHERE source_id = $source_id GROUP BY escrow_id
