-- name: epoch_reports
-- description: Epoch reports written by `gonka-evidence run`: host, epoch, when and why the epoch closed, where the report is, its content fingerprint.
-- params: none
SELECT host, epoch_id, closed_at, closed_by, report_dir, fingerprint, written_at, rewrites
FROM epoch_reports
ORDER BY host, epoch_id
