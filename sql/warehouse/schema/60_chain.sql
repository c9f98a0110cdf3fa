-- Chain parameters the evidence rules rest on (pipeline/core/chain.py): the defaults read from upstream and
-- the config file's [[chain]] entries, written by `gonka-evidence run` (pipeline/ingest/chain.py).
CREATE TABLE IF NOT EXISTS chain_params_t (
  name VARCHAR NOT NULL, model VARCHAR, value VARCHAR NOT NULL, since TIMESTAMPTZ, source VARCHAR NOT NULL,
  assumed BOOLEAN NOT NULL);
