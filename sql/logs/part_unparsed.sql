-- Unparsed lines one run quarantined for one file identity (a part of a longer copy of it).
SELECT count(*) FROM quarantine WHERE run_id = $run_id AND source_id = 'logs:' || $host || ':' || $file_id;
