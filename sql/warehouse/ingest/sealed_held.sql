-- Whether the warehouse holds a sealed row of any escrow in this chunk's sealed rows: if not, every row is
-- new and insert_all_sealed.sql writes them without upsert_sealed.sql's ranking against stored rows.
SELECT count(*) > 0 FROM raw_sealed_inferences WHERE escrow_id IN (SELECT DISTINCT escrow_id FROM new_sealed)
