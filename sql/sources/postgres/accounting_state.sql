-- Escrow identity rows of the accounting ledger (docs/sources.md, accounting ledger).
SELECT escrow_id, creation_epoch::bigint AS creation_epoch, model, meta_json, phase,
       phase_rank::bigint AS phase_rank, latest_nonce::bigint AS latest_nonce
FROM accounting_escrow_state
