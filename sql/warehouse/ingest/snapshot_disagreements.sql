-- Slots of this copy's checkpoints whose host stats disagree with the diff log or the ledger, and how
-- many of them are in escrows joined by import (whose diff log lacks the history before it).
-- params: $source_id
SELECT count(*) AS slots, count(*) FILTER (WHERE d.history_before_import) AS imported
FROM snapshot_host_stats_disagreements d JOIN raw_snapshots s USING (escrow_id)
WHERE s.source_id = $source_id
