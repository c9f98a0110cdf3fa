-- Payload keys being written (registered as payload_keys) that no inference of the warehouse has.
SELECT count(*) FROM payload_keys k
WHERE NOT EXISTS (SELECT 1 FROM d_inferences i WHERE i.escrow_id = k.escrow_id AND i.inference_id = k.inference_id)
