-- Build attribution: the entry of host_builds in force at each row's event time (an as-of join
-- bounded by valid_to), for the escrows in `attribute_escrows` (every escrow after a builds load).
UPDATE d_inferences i SET executor_build = (
  SELECT b.build FROM host_builds_t b
  WHERE b.host = i.executor AND i.event_at >= b.valid_from AND (b.valid_to IS NULL OR i.event_at < b.valid_to)
)
WHERE i.escrow_id IN (SELECT escrow_id FROM attribute_escrows);

UPDATE d_validations v SET
  validator_build = (
    SELECT b.build FROM host_builds_t b
    WHERE b.host = v.validator AND v.event_at >= b.valid_from AND (b.valid_to IS NULL OR v.event_at < b.valid_to)),
  executor_build = (
    SELECT b.build FROM host_builds_t b
    WHERE b.host = v.executor AND v.event_at >= b.valid_from AND (b.valid_to IS NULL OR v.event_at < b.valid_to))
WHERE v.escrow_id IN (SELECT escrow_id FROM attribute_escrows);
