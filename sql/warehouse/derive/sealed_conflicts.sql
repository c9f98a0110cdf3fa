SELECT c.escrow_id, c.inference_id, c.field, c.stored, c.copy, c.stored_source_id, c.copy_source_id
FROM raw_sealed_conflicts c JOIN chunk_escrows USING (escrow_id)
