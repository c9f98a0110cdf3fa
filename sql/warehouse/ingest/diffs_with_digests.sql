-- The chunk's decoded diffs with the digest of their bytes (new_diff_digests: every diff the copy holds).
SELECT d.*, g.digest FROM new_diffs_decoded d JOIN new_diff_digests g USING (escrow_id, nonce)
