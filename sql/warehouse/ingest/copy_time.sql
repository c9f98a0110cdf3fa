-- The copy time of a source: the newest event time at the head of any of its escrows.
SELECT max(t.event_at) FROM copy_heads h JOIN d_tx_times t ON t.escrow_id = h.escrow_id AND t.nonce = h.latest_nonce
