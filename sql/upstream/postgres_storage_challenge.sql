-- Step 14 of the HA line (devshard_storage_challenge).
ALTER TABLE devshard_storage_identity ADD COLUMN IF NOT EXISTS challenge UUID, ADD COLUMN IF NOT EXISTS challenged_at TIMESTAMPTZ;
