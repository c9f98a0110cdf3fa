DELETE FROM d_escrows WHERE escrow_id IN (SELECT escrow_id FROM chunk_escrows);
DELETE FROM d_escrow_slots WHERE escrow_id IN (SELECT escrow_id FROM chunk_escrows);
DELETE FROM d_tx_times WHERE escrow_id IN (SELECT escrow_id FROM chunk_escrows);
DELETE FROM d_inferences WHERE escrow_id IN (SELECT escrow_id FROM chunk_escrows);
DELETE FROM d_validations WHERE escrow_id IN (SELECT escrow_id FROM chunk_escrows);
DELETE FROM d_replay_disagreements WHERE escrow_id IN (SELECT escrow_id FROM chunk_escrows);
DELETE FROM d_escrow_rule_sets WHERE escrow_id IN (SELECT escrow_id FROM chunk_escrows);
