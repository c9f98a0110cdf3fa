-- insert_txs.sql when this run stored every diff of the chunk (none held before, none a fork kept aside):
-- then every transaction read is new to tx_log, and no join with raw_diffs is needed.
INSERT INTO tx_log BY NAME (SELECT * FROM new_txs)
