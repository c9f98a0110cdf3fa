"""Confidence intervals and tests for evidence tables, on scipy and statsmodels.

Evidence tables compare rates of rare events (invalidated answers, INVALID
votes) between builds, often with small samples and counts near zero. The
choices here follow from that:

- rates get a Wilson score interval, which stays inside [0, 1] and keeps its
  coverage near 0 and 1, where the Wald interval collapses to zero width;
- two groups get Fisher's exact test, valid for any cell count;
- two groups observed across escrows get a Cochran–Mantel–Haenszel test, so
  that differences between escrows (traffic, validators, epochs) do not pass
  for a difference between the groups.

Every 2x2 table is ``[[a, b], [c, d]]``: rows are the groups compared (first
row = the group of interest), columns are outcome yes / no.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import StratifiedTable
from statsmodels.stats.proportion import proportion_confint

__all__ = [
    "CMHResult",
    "FisherResult",
    "cmh_test",
    "fisher_exact_2x2",
    "wilson_interval",
    "with_wilson",
]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for the proportion ``successes / n``.

    Returns ``(low, high)``, both within [0, 1]. With ``n == 0`` there is no
    estimate and the result is ``(nan, nan)``.

    Wilson rather than Wald: the rates we publish are often a few per cent or
    per mille (15 invalidated of 2,127). The Wald interval p ± z·sqrt(p(1-p)/n)
    has zero width at 0 of n and undercovers badly near 0 and 1; the Wilson
    interval inverts the score test instead, so ``0/10`` still gives a useful
    upper bound (0.2775) and coverage stays close to nominal for small n.
    """
    _check_count(successes, n)
    if n == 0:
        return (math.nan, math.nan)
    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    return (float(low), float(high))


def with_wilson(
    df: pl.DataFrame,
    successes_col: str,
    n_col: str,
    prefix: str = "ci",
    confidence: float = 0.95,
) -> pl.DataFrame:
    """``df`` with Wilson interval columns ``{prefix}_low`` and ``{prefix}_high`` added.

    The interval is for ``successes_col / n_col`` on every row, computed in one
    vectorised statsmodels call. Rows where ``n_col`` is 0 or either count is
    null get null bounds (no estimate), so renderers show them as missing.
    Raises ``ValueError`` if a count is negative or successes exceed n.

    Renderers pair ``ci_low``/``ci_high`` with the frame's rate column: name the
    prefix after the rate (``invalid_rate`` → ``prefix="invalid_rate_ci"``)
    when a frame has more than one rate.
    """
    successes = df.get_column(successes_col).cast(pl.Float64).to_numpy()
    n = df.get_column(n_col).cast(pl.Float64).to_numpy()
    known = ~(np.isnan(successes) | np.isnan(n))
    if np.any((successes[known] < 0) | (successes[known] > n[known])):
        raise ValueError(f"{successes_col} must lie within [0, {n_col}] on every row")
    estimable = known & (n > 0)
    low = np.full(len(n), np.nan)
    high = np.full(len(n), np.nan)
    if estimable.any():
        low[estimable], high[estimable] = proportion_confint(
            successes[estimable], n[estimable], alpha=1 - confidence, method="wilson"
        )
    return df.with_columns(
        pl.Series(f"{prefix}_low", low, dtype=pl.Float64).fill_nan(None),
        pl.Series(f"{prefix}_high", high, dtype=pl.Float64).fill_nan(None),
    )


@dataclass(frozen=True)
class FisherResult:
    """Fisher's exact test on one 2x2 table.

    ``odds_ratio`` is the sample odds ratio ``a*d / (b*c)`` (0 or inf when a
    cell is empty, nan when a row or column is empty); ``p_value`` is exact.
    """

    odds_ratio: float
    p_value: float
    alternative: str


def fisher_exact_2x2(a: int, b: int, c: int, d: int) -> FisherResult:
    """Two-sided Fisher exact test of the table ``[[a, b], [c, d]]``.

    Exact because evidence tables compare small or very unequal samples (10
    votes against 390) where the chi-square approximation does not hold.
    The two-sided p-value sums the probabilities of all tables with the same
    margins that are no more likely than the one observed.
    """
    table = np.array([[a, b], [c, d]])
    if np.any(table < 0):
        raise ValueError("2x2 table counts must be non-negative")
    result = scipy_stats.fisher_exact(table, alternative="two-sided")
    return FisherResult(
        odds_ratio=float(result.statistic),
        p_value=float(result.pvalue),
        alternative="two-sided",
    )


@dataclass(frozen=True)
class CMHResult:
    """Cochran–Mantel–Haenszel test over strata of 2x2 tables.

    ``statistic`` is the MH chi-square (1 df), ``p_value`` its upper tail,
    ``pooled_odds_ratio`` the Mantel–Haenszel common odds ratio with its
    Robins–Breslow–Greenland confidence interval ``or_ci_low``..``or_ci_high``.
    ``strata_used`` / ``strata_dropped`` count the tables kept and the tables
    dropped because one group had no observations in them.
    """

    statistic: float
    p_value: float
    pooled_odds_ratio: float
    or_ci_low: float
    or_ci_high: float
    strata_used: int
    strata_dropped: int


def cmh_test(
    tables: Sequence[Sequence[Sequence[int]]],
    confidence: float = 0.95,
    correction: bool = True,
) -> CMHResult:
    """Cochran–Mantel–Haenszel test that the common odds ratio across strata is 1.

    ``tables`` is one 2x2 table ``[[a, b], [c, d]]`` per stratum (per escrow:
    the groups compared are rows, outcome yes / no are columns). Comparing
    groups within each escrow and pooling keeps escrow-level differences
    (traffic, validator sets, epoch) from passing for a group difference.

    A stratum where one group has no observations says nothing about the
    comparison (its MH weight is zero) and would make the variance 0/0, so it
    is dropped and counted in ``strata_dropped``. When every stratum is
    dropped the results are nan with ``strata_used == 0``.

    The continuity correction (statsmodels ``test_null_odds(correction=True)``)
    is applied as in R's ``mantelhaen.test``: only when the observed-minus-
    expected total is at least 0.5, since subtracting 0.5 from a smaller
    difference would inflate the statistic. The p-value is taken from the
    chi-square survival function so that it keeps its precision far in the
    tail instead of rounding to 0.
    """
    arrays = [np.asarray(t, dtype=float) for t in tables]
    for table in arrays:
        if table.shape != (2, 2):
            raise ValueError(f"each stratum must be a 2x2 table, got shape {table.shape}")
        if np.any(table < 0):
            raise ValueError("2x2 table counts must be non-negative")
    used = [t for t in arrays if t[0].sum() > 0 and t[1].sum() > 0]
    dropped = len(arrays) - len(used)
    if not used:
        nan = math.nan
        return CMHResult(nan, nan, nan, nan, nan, strata_used=0, strata_dropped=dropped)

    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        # Zero sums (every stratum without discordant cells) give 0 or inf odds
        # ratios and nan intervals by design; numpy's warnings add nothing.
        warnings.simplefilter("ignore", RuntimeWarning)
        stratified = StratifiedTable(np.stack(used, axis=2))
        test = stratified.test_null_odds(correction=correction and _mh_deviation(used) >= 0.5)
        statistic = float(test.statistic)
        p_value = float(scipy_stats.chi2.sf(statistic, df=1))
        pooled = float(stratified.oddsratio_pooled)
        low, high = stratified.oddsratio_pooled_confint(alpha=1 - confidence)
    return CMHResult(
        statistic=statistic,
        p_value=p_value,
        pooled_odds_ratio=pooled,
        or_ci_low=float(low),
        or_ci_high=float(high),
        strata_used=len(used),
        strata_dropped=dropped,
    )


def _mh_deviation(tables: list[np.ndarray]) -> float:
    """|sum of a - E[a]| over strata, E[a] = row1 total * column1 total / n (the MH numerator)."""
    return abs(sum(t[0, 0] - t[0].sum() * t[:, 0].sum() / t.sum() for t in tables))


def _check_count(successes: int, n: int) -> None:
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
