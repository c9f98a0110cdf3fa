-- Public warehouse views (docs/data-model.md). Names and columns are a contract: extend, never break.

CREATE OR REPLACE VIEW host_builds AS
SELECT host, build, valid_from, valid_to FROM host_builds_t;

-- Verdict rule sets of devshard validation (docs/sources.md, inference lifecycle, verdict rules by version), each with
-- its upstream source. From gonka-ai/gonka #1487 (merged 2026-07-20) devshard's EvaluateValidationResponse makes a
-- 400/422 of the validator's own re-run, and an executor answer without logprobs judged against one with them,
-- invalid; before, both passed. Short-output validation (gonka#1955) ships as a new devshard version of its own
-- (no date: versiond keeps a session on one version): score 1 - max(sum/N - 0.10/sqrt(N), sum/max(100, N)),
-- per-position ceiling and sampler-support checks, no min_tokens floor. by_date = the rule can be chosen by time.
CREATE OR REPLACE VIEW verdict_rules AS
SELECT * FROM (VALUES ('before #1487', NULL::TIMESTAMPTZ, TIMESTAMPTZ '2026-07-20 00:00:00+00',
                       'a 400/422 of the validator''s re-run, and an executor answer without logprobs, pass',
                       'gonka-ai/gonka decentralized-api/internal/devshard/shared_runtime.go @dd8711ab', TRUE),
                      ('#1487', TIMESTAMPTZ '2026-07-20 00:00:00+00', NULL::TIMESTAMPTZ,
                       'a 400/422 of the validator''s re-run, and an executor answer without logprobs, are invalid',
                       'gonka-ai/gonka #1487 (decentralized-api/internal/devshard/validation_failopen_test.go @3e21afaf)', TRUE),
                      ('short-output #1955', NULL::TIMESTAMPTZ, NULL::TIMESTAMPTZ,
                       'similarity 1 - max(sum/N - 0.10/sqrt(N), sum/max(100, N)); ceiling and sampler-support checks '
                       'reject on DeepSeek-V4-Flash-0731 and GLM-5.3-Flash, log only elsewhere; no min_tokens floor',
                       'gonka-ai/gonka devshard/docs/proposals/short-output-validation.md @fd475011, '
                       'common/validation/scoring.go @d2343c05', FALSE))
  AS t(rule, valid_from, valid_to, meaning, source, by_date);

-- Which rule set each devshard version runs, as the operator states it (builds file, [[devshard_versions]]).
CREATE OR REPLACE VIEW devshard_version_rules AS
SELECT version, rule FROM devshard_version_rules_t;

-- The time whose rule a verdict of `validator_` at `at_` follows: its build's start where the build is known.
CREATE OR REPLACE MACRO verdict_rule_time(validator_, at_) AS
  coalesce((SELECT max(b.valid_from) FROM host_builds_t b WHERE b.host = validator_ AND b.valid_from <= at_), at_);
CREATE OR REPLACE MACRO verdict_rule(validator_, at_) AS
  (SELECT r.rule FROM verdict_rules r
   WHERE r.by_date AND verdict_rule_time(validator_, at_) >= coalesce(r.valid_from, '-infinity'::TIMESTAMPTZ)
     AND verdict_rule_time(validator_, at_) < coalesce(r.valid_to, 'infinity'::TIMESTAMPTZ));
-- 'build' when the validator's build at `at_` is known, else 'date'
CREATE OR REPLACE MACRO verdict_rule_by(validator_, at_) AS
  CASE WHEN EXISTS (SELECT 1 FROM host_builds_t b WHERE b.host = validator_ AND b.valid_from <= at_)
       THEN 'build' ELSE 'date' END;
-- The rule set of the escrow's devshard version (escrows.version) where the version's rules are known, else NULL.
CREATE OR REPLACE MACRO escrow_rule(escrow_) AS
  (SELECT max(r.rule) FROM d_escrows e JOIN devshard_version_rules_t r ON r.version = e.version
   WHERE e.escrow_id = escrow_);
-- A verdict's rule set: its escrow's version's where known ('version'), else by build or date as above (assumed).
CREATE OR REPLACE MACRO verdict_rule_of(escrow_, validator_, at_) AS
  coalesce(escrow_rule(escrow_), verdict_rule(validator_, at_));
CREATE OR REPLACE MACRO verdict_rule_by_of(escrow_, validator_, at_) AS
  CASE WHEN escrow_rule(escrow_) IS NOT NULL THEN 'version' ELSE verdict_rule_by(validator_, at_) END;

CREATE OR REPLACE VIEW escrows AS
SELECT e.epoch_id, e.escrow_id, e.model, e.version, e.status, e.group_size, e.vote_threshold, e.validation_rate,
       e.creator_addr, e.settled_at, e.latest_nonce, e.finalize_nonce, e.time_source,
       c.held_ranges, c.missing_nonces, c.missing_ranges, c.complete, c.conflicted, c.forked_nonces,
       c.conflicting_seals, c.conflicting_signatures
FROM d_escrows e LEFT JOIN d_escrow_coverage c USING (escrow_id);

CREATE OR REPLACE VIEW escrow_slots AS
SELECT epoch_id, escrow_id, slot_id, address, address_slots FROM d_escrow_slots;

CREATE OR REPLACE VIEW txs AS
SELECT t.epoch_id, t.escrow_id, t.nonce, t.tx_index, t.kind,
       t.inference_id,
       CASE
         WHEN t.kind IN ('validation', 'vote', 'finish') THEN t.slot
         WHEN t.kind IN ('start', 'confirm', 'timeout', 'error_miss') THEN t.inference_id % e.group_size
       END AS slot,
       s.address,
       t.valid,
       CASE
         WHEN t.kind = 'timeout' THEN CASE t.timeout_reason WHEN 1 THEN 'refused' WHEN 2 THEN 'execution'
                                       WHEN 3 THEN 'error' WHEN 0 THEN 'unspecified'
                                       ELSE 'reason ' || t.timeout_reason END
         WHEN t.kind = 'other' THEN t.member || ' (field ' || coalesce(t.field_number::VARCHAR, '?') || ')'
       END AS reason,
       tt.event_at
FROM tx_log t
LEFT JOIN d_escrows e USING (escrow_id)
LEFT JOIN d_escrow_slots s ON s.escrow_id = t.escrow_id AND s.slot_id = (
       CASE WHEN t.kind IN ('validation', 'vote', 'finish') THEN t.slot
            WHEN t.kind IN ('start', 'confirm', 'timeout', 'error_miss') THEN t.inference_id % e.group_size END)
LEFT JOIN d_tx_times tt ON tt.escrow_id = t.escrow_id AND tt.nonce = t.nonce;

-- Build columns are the as-of join of host_builds on event_at, materialised by the ingest and by
-- `gonka-evidence builds` (sql/warehouse/builds/attribute.sql), so filters on host reach the table.
CREATE OR REPLACE VIEW inferences AS
SELECT epoch_id, escrow_id, inference_id, model, executor, executor_slot, status, sealed,
       challenged, votes_valid, votes_invalid, input_tokens, output_tokens, started_at, confirmed_at,
       executor_build, drained, pre_drain_status, drain_outcome, cleared, finished, miss_kind, event_at,
       sealed_nonce, sealed_status
FROM d_inferences;

CREATE OR REPLACE VIEW validations AS
SELECT epoch_id, escrow_id, inference_id, nonce, kind, validator, validator_slot, executor, valid,
       event_at, validator_build, executor_build, tx_index, counted, after_resolution, final_status,
       inference_started_at, coalesce(validator = executor, FALSE) AS self_verdict
FROM d_validations;

CREATE OR REPLACE VIEW replay_disagreements AS
SELECT epoch_id, escrow_id, inference_id, field, replayed, sealed FROM d_replay_disagreements;

-- Replay rule sets (pipeline/transforms/rule_sets.py; docs/sources.md, replay rule sets): rules of the devshard
-- state machine that changed upstream, oldest first.
CREATE OR REPLACE VIEW replay_rule_sets AS
SELECT * FROM (VALUES
    (1, 'finished-only', 'gonka-ai/gonka devshard/state/machine.go @39854687 (applyValidation)',
     'a MsgValidation counts only while the record is finished; one arriving while it is challenged adds nothing'),
    (2, 'late-validation', 'gonka-ai/gonka devshard/state/machine.go @d5fbfa38 (applyValidation)',
     'a MsgValidation arriving while the record is challenged adds its address''s weight to the challenge tally like a vote, and can resolve it'))
  AS t(ordinal, rule_set, source, meaning);

CREATE OR REPLACE VIEW escrow_rule_sets AS
SELECT epoch_id, escrow_id, version, rule_set, chosen_by, seals_compared, seals_reproduced, reproduced_by,
       best_rule_set, best_reproduced, chosen_by IN ('assumed_version', 'assumed') AS assumed
FROM d_escrow_rule_sets;

COMMENT ON VIEW replay_rule_sets IS 'The replay''s rule sets, oldest first (ordinal): each names a version of a devshard state-machine rule that changed upstream, with its upstream source (repository path @commit) and what it does. escrow_rule_sets says which one each escrow''s inferences and validations follow.';
COMMENT ON VIEW escrow_rule_sets IS 'Per escrow, the replay rule set (replay_rule_sets) its inferences (status, votes, resolved_nonce, cleared) and validations (counted, after_resolution) follow, and how it was chosen: chosen_by = seals (the only rule set whose outcomes reproduce every compared seal), seals_tie (several do, the seals do not tell them apart: the one the escrow''s version is known to use, else the newest of them), none_reproduces (no rule set reproduces every seal: the one reproducing the most, the newest of equals, is used and the escrow is flagged; reproduced_by is NULL), assumed_version (no seals: the rule set every escrow of the same devshard version chose by seals), assumed (no seals and no such version: the newest). A seal is compared where the copy holds a full sealed row (sealed_nonce > 0) of a record the diff log holds from its start and that the settlement drain did not seal; it is reproduced when its status and the vote counts it has are equal. seals_compared = seals compared; seals_reproduced = how many the chosen rule set reproduced; reproduced_by = the rule sets that reproduce all of them (comma-separated, oldest first); best_rule_set and best_reproduced = the rule set that reproduces the most seals (the newest of equals) and how many (NULL without seals). assumed = no seal was compared, so the rule set is assumed (chosen_by assumed_version or assumed). No upstream source ties a devshard version to a rule set (the version is a build stamp and the change is undated), so versions are tied only through seals. An escrow last derived by a release before rule sets has no row here (its rows follow finished-only) until an ingest touches it again.';
COMMENT ON VIEW escrows IS 'One row per escrow (devshard session): epoch, model, runtime version, status (active/settled), group size N, VoteThreshold (tallies must exceed it), validation rate in basis points, creator (gateway), settlement time (UTC). Newest copy wins. held_ranges = the nonce ranges of its diff log the warehouse holds (all copies together); missing_nonces / missing_ranges = nonces of 1 .. latest_nonce that no copy held; complete = none missing; conflicted = copies disagree on a diff''s bytes (forked_nonces, see diff_forks) or on a real seal (conflicting_seals) or a host signature (conflicting_signatures); escrow_coverage has the ranges per copy.';
COMMENT ON VIEW escrow_slots IS 'Group membership: one row per slot with the address holding it; address_slots = vote weight of that address in the escrow.';
COMMENT ON VIEW txs IS 'Every transaction of the diff log, deduplicated across copies and hosts on (escrow_id, nonce, tx_index). kind in start, confirm, finish, timeout, validation, vote, error_miss, finalize, other; reason = timeout reason (refused 1, execution 2, error 3: a reason-3 timeout is an error miss), or the oneof member / field number of kind other. event_at = diffs.created_at when set, else the escrow nonce clock.';
COMMENT ON VIEW inferences IS 'One row per inference, status from replaying the diff log under the devshard state machine (sealed rows only confirm it), by the escrow''s replay rule set (escrow_rule_sets). sealed = a sealed row with sealed_nonce > 0; challenged = ever received an invalid MsgValidation; cleared = challenged then validated; finished = has a finish transaction; drained = still pending or started when the escrow entered settlement (no finish, timeout or error-miss transaction before it): never an answer, never a miss; pre_drain_status = pending | started (NULL when not drained); drain_outcome = unchanged (sealed as it was) | refunded (pending -> timed_out, cost back to the creator) | paid (-> finished at reserved cost), NULL when the copy does not tell or copies disagree; status stays what the store says; miss_kind = refused | execution | error_miss (MsgErrorMiss or a reason-3 timeout) for the inferences that are misses. executor_build from an as-of join of host_builds on event_at.';
COMMENT ON VIEW validations IS 'Every verdict in the diff log: kind validation (MsgValidation, the sampled check) or vote (MsgValidationVote after a challenge). counted = the verdict added weight to the tally; after_resolution = cast after the inference was validated or invalidated (a no-op); both under the escrow''s replay rule set (escrow_rule_sets: a validation while the inference is challenged counts under late-validation, not under finished-only); final_status and inference_started_at = the judged inference''s final status and start; self_verdict = the validator''s address is the executor''s (another slot of the same host validating its answer, or a vote on its own challenge): replayed as upstream did when the copy was written (such verdicts counted), and flagged. Builds from as-of joins of host_builds on event_at.';
COMMENT ON VIEW verdict_rules IS 'Verdict rule sets of devshard validation, each with its upstream source (docs/sources.md, verdict rules by version): before #1487 (a 400/422 of the validator''s own re-run and an executor answer without logprobs pass) until gonka-ai/gonka #1487 (merged 2026-07-20), #1487 (both invalid) after; short-output #1955 (similarity 1 - max(sum/N - 0.10/sqrt(N), sum/max(100, N)), per-position ceiling and sampler-support checks that reject on DeepSeek-V4-Flash-0731 and GLM-5.3-Flash, no min_tokens floor), a devshard version of its own with no date (by_date false). A verdict follows the rule set of its escrow''s devshard version where devshard_version_rules names it (rule_by version); else, assumed, the rule of its validator''s build (the build''s start; rule_by build) or of the verdict''s time (rule_by date): macros verdict_rule_of(escrow, validator, at) and verdict_rule_by_of(escrow, validator, at); verdict_rule(validator, at) and verdict_rule_by(validator, at) give the dated choice alone.';
COMMENT ON VIEW devshard_version_rules IS 'The verdict rule set (verdict_rules.rule) each devshard version (escrows.version) runs, as the builds file states it ([[devshard_versions]]): upstream names the version only at build time (devshardd -X main.Version, approved_versions.name), so the warehouse cannot know it otherwise.';
COMMENT ON VIEW host_builds IS 'Build timeline of hosts (gonka-evidence builds FILE.toml): each entry lasts from valid_from until the host''s next entry (valid_to, NULL = open).';
COMMENT ON VIEW replay_disagreements IS 'Inferences whose replayed facts differ from the copy''s sealed row (status, votes, executor slot, tokens); field drain_outcome = a drained record sealed with a status no drain rule gives (or the escrow''s drained rows contradict each other); field drained_between_copies = two copies of the escrow hold different seals of a drained record (replayed = the stored copy, sealed = the other copy).';
COMMENT ON TABLE ingest_runs IS 'One row per ingest run: source id (lineage UUID, or the SQLite store''s directory name), kind, copy time, rows per table (JSON), status (running, then ok or failed; aborted when a killed writer left it running), pipeline version, input digest (sha256 of what the run read), run_seq (the order runs were made in: the latest run is the highest, whatever the clock said; NULL for runs made before the column).';
COMMENT ON TABLE ingest_accounting IS 'Where every row an ingest run read went, per input (a table of a copy, the files of a store, payload or log directory, the lines of a log): rows_read = rows_used (written or kept) + rows_deduplicated (its key already held, by an identical row or by a copy further along) + rows_quarantined (each with its reason in quarantine). unit is rows, files or lines; note names what was seen and deliberately not read (known tables, companion files). Payloads: input payload files (a store''s payloads/ directory) or payload_storage (rows); a payload with a problem is quarantined though its answer_checks row is written, a known answer or a .json superseded by its .json.zst is deduplicated, and used answers of no inference in the warehouse are counted in note. Ledger: input = the ledger table (accounting_meta, accounting_escrows, accounting_escrow_state, ...); a row of an escrow the warehouse holds as far along is deduplicated, one of no attributable escrow (no state row, a blob that is no JSON object, a leftover legacy blob in PostgreSQL) or with an unparsable counter key is quarantined. The ingest checks the identity before it records a run as ok.';
COMMENT ON TABLE quarantine IS 'Rows that could not be decoded (bad protobuf, bad JSON, unknown values), with source, table, key and reason.';
