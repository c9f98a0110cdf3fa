-- Public views of the scheduled job (`gonka-evidence run`): which epochs are settled, which reports exist.

CREATE OR REPLACE VIEW epoch_settlement AS
SELECT epoch_id, count(*) AS escrows,
       count(*) FILTER (status = 'settled' AND settled_at IS NOT NULL) AS escrows_settled,
       max(settled_at) AS last_settled_at
FROM escrows GROUP BY epoch_id;

CREATE OR REPLACE VIEW epoch_reports AS
SELECT host, epoch_id, closed_at, closed_by, report_dir, fingerprint, written_at, rewrites FROM epoch_reports_t;

COMMENT ON VIEW epoch_settlement IS 'Per epoch: escrows, escrows settled, and the last settlement time (UTC). An epoch is closed when every escrow is settled, or finality_lag after its last settlement on the data clock (the newest copy time); see the named query closed_epochs.';
COMMENT ON VIEW epoch_reports IS 'Epoch reports written by gonka-evidence run: host, epoch, closed_at and closed_by (all escrows settled | finality lag), report directory, content fingerprint (sha256 of the Markdown without provenance lines), when it was last written, how many times it was rewritten.';
