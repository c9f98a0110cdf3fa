-- The coverage row of one log file (identity = digest of its first line). A read of at least as many
-- lines as the last one replaces the row (another --year or --timezone corrects first_at / last_at); a
-- shorter, older copy read later leaves the lines beyond it, and their end time, as they were.
INSERT INTO log_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (host, file_id, kind) DO UPDATE SET
  path = excluded.path, first_at = excluded.first_at,
  last_at = CASE WHEN excluded.lines >= log_files.lines THEN excluded.last_at ELSE log_files.last_at END,
  records = CASE WHEN excluded.lines >= log_files.lines THEN excluded.records ELSE log_files.records END,
  unparsed = CASE WHEN excluded.lines >= log_files.lines THEN excluded.unparsed ELSE log_files.unparsed END,
  lines = greatest(log_files.lines, excluded.lines), run_id = excluded.run_id;
