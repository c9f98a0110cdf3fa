-- Sealed rows change in place (a live obs row is later overwritten by the real seal). The caller passes
-- only rows of escrows whose copy is at least as far along as the stored one, so the newest copy wins.
INSERT OR REPLACE INTO raw_sealed_inferences BY NAME (SELECT * FROM new_sealed)
