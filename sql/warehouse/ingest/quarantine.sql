INSERT OR IGNORE INTO quarantine BY NAME (SELECT * FROM new_quarantine)
