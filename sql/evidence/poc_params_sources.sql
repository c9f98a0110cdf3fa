-- Where the p_mismatch and cutoff of the PoC results came from (the whole warehouse).
SELECT DISTINCT params_source
FROM poc_results
