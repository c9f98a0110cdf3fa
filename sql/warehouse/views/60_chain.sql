-- Chain parameters by model and time (pipeline/core/chain.py; docs/configuration.md, [[chain]]).
CREATE OR REPLACE VIEW chain_params AS
SELECT name, model, value, since, source, assumed FROM chain_params_t;

COMMENT ON VIEW chain_params IS 'Chain parameters the evidence rules rest on, one row per (name, model, since): name in validation_threshold (per model; gonka-ai/gonka devshard/docs/proposals/short-output-validation.md @fd475011), logprobs_mode (chainParams.LogprobsMode()), poc_seq_len (tokens per PoC sequence; per model on chain since the v0_2_17 upgrade); model NULL = every model; value as written; since = the time it applies from (NULL = from the start of the data); source = where it comes from; assumed = a default of this release (pipeline/core/chain.py), not a value the config file''s [[chain]] entries state. Written by gonka-evidence run; a rule that finds the table empty uses the defaults, assumed.';
