INSERT OR IGNORE INTO raw_validation_obs BY NAME (SELECT escrow_id, inference_id, slot_id, epoch_id FROM new_obs)
