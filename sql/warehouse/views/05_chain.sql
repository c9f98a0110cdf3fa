-- Chain parameters by model and time (pipeline/core/chain.py; docs/configuration.md, [[chain]]).
CREATE OR REPLACE VIEW chain_params AS
SELECT name, model, value, since, source, assumed FROM chain_params_t;

-- The rows the rules use: the table `gonka-evidence run` wrote, else (never run) the defaults, assumed.
CREATE OR REPLACE MACRO chain_params_in_use() AS TABLE
SELECT name, model, value, since, source, assumed FROM chain_params_t
UNION ALL
SELECT name, model, value, since, source, assumed FROM chain_param_defaults()
WHERE NOT EXISTS (SELECT 1 FROM chain_params_t);

-- The one lookup of a chain value in SQL, as pipeline.core.chain.chain_value: of the rows of `name_` that fit
-- `model_` (every model, or a model name that is part of it, organisation dropped, case aside) and apply at `at_`
-- (since at or before it; NULL: the newest), the longest model name, then the latest since, then a stated value.
-- A struct (value, source, assumed); NULL when none fits.
CREATE OR REPLACE MACRO chain_value_of(name_, model_, at_) AS (
  SELECT struct_pack(value := p.value, source := p.source, assumed := p.assumed)
  FROM chain_params_in_use() p
  WHERE p.name = name_
    AND (p.model IS NULL OR contains(lower(coalesce(model_, '')), lower(regexp_replace(p.model, '^.*/', ''))))
    AND (p.since IS NULL OR at_ IS NULL OR p.since <= at_)
  ORDER BY length(regexp_replace(p.model, '^.*/', '')) DESC NULLS LAST, p.since DESC NULLS LAST, p.assumed
  LIMIT 1);

-- Validation thresholds by model, from the chain parameters (a log line without a threshold of its own is judged
-- by the one that fits its model at its time, chain_value_of: validation_scores).
CREATE OR REPLACE VIEW model_validation_thresholds AS
SELECT regexp_replace(model, '^.*/', '') AS model_pattern, value::DOUBLE AS threshold, since, source, assumed
FROM chain_params_in_use() WHERE name = 'validation_threshold';

COMMENT ON VIEW chain_params IS 'Chain parameters the evidence rules rest on, one row per (name, model, since): name in validation_threshold (per model; gonka-ai/gonka devshard/docs/proposals/short-output-validation.md @fd475011, Qwen3-235B-A22B from inference-chain/app/upgrades/v0_2_13/upgrades.go @2bb97262), logprobs_mode (chainParams.LogprobsMode()), poc_seq_len (tokens per PoC sequence; per model on chain since the v0_2_17 upgrade); model NULL = every model, else matched as a case-insensitive substring of the model name (organisation dropped; the longest that matches wins); value as written; since = the time it applies from (NULL = from the start of the data); source = where it comes from; assumed = a default of this release (pipeline/core/chain.py), not a value the config file''s [[chain]] entries state. Written by gonka-evidence run; a rule that finds the table empty uses the defaults, assumed.';
COMMENT ON VIEW model_validation_thresholds IS 'The validation_threshold rows of chain_params (its defaults while gonka-evidence run has not written it), used when a validator log line carries no threshold: model_pattern = the model name without its organisation (NULL = every model), matched as a case-insensitive substring of the line''s model; threshold; since = the time it applies from (NULL = from the start of the data); source; assumed = a default of this release, not a value the config file''s [[chain]] entries state. Of the rows that fit a line (model matches, since at or before the line), the longest model_pattern wins, then the latest since, then a stated value over a default.';
