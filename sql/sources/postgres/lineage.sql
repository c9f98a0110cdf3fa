-- The copy's storage lineage (one row): its source id when present.
SELECT identity::text AS id FROM devshard_storage_identity
