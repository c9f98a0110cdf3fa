-- Upstream payload storage (docs/sources.md, payloads; gonka-ai/gonka common/storage/payloads/store.go).
-- Partitioned like the session tables: children payload_storage_epoch_<N> FOR VALUES FROM (N) TO (N+1).
CREATE TABLE IF NOT EXISTS payload_storage (
  escrow_id TEXT NOT NULL, inference_id INT NOT NULL, epoch_id BIGINT NOT NULL,
  prompt_payload BYTEA, response_payload BYTEA,
  PRIMARY KEY (escrow_id, inference_id, epoch_id)) PARTITION BY RANGE (epoch_id);
