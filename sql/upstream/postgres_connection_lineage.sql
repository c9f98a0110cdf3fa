-- Step 15 of the HA line (devshard_connection_lineage).
CREATE TABLE IF NOT EXISTS devshard_connection_lineage (token UUID PRIMARY KEY, created_at TIMESTAMPTZ NOT NULL DEFAULT NOW());
