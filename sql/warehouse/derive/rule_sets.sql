-- The replay rule sets other escrows already chose (their version ties; pipeline/transforms/rule_sets.py).
SELECT escrow_id, version, rule_set, chosen_by FROM d_escrow_rule_sets
WHERE escrow_id NOT IN (SELECT escrow_id FROM chunk_escrows)
