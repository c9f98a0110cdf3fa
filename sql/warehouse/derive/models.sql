-- The model of an escrow: the most common MsgStartInference model in its log.
SELECT escrow_id, arg_max(model, n) AS model FROM (
  SELECT t.escrow_id, t.model, count(*) AS n FROM tx_log t JOIN chunk_escrows c USING (escrow_id)
  WHERE t.kind = 'start' AND t.model <> '' GROUP BY ALL
) GROUP BY escrow_id
