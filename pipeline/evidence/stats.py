"""Confidence intervals and tests for evidence tables, on scipy and statsmodels.

Evidence tables compare rates of rare events (invalidated answers, INVALID
votes) between builds, often with small samples and counts near zero. The
choices here follow from that:

- rates get a Wilson score interval, which stays inside [0, 1] and keeps its
  coverage near 0 and 1, where the Wald interval collapses to zero width;
- two groups get Fisher's exact test, valid for any cell count; more than two
  groups (builds) get its r×2 extension, the Fisher–Freeman–Halton test;
- two groups observed across escrows get a Cochran–Mantel–Haenszel test, so
  that differences between escrows (traffic, validators, epochs) do not pass
  for a difference between the groups, with the Breslow–Day test of whether
  one common odds ratio describes every stratum at all;
- several tests in one table get Holm-adjusted p-values;
- ratios of sums over log windows (acceptance rate, mean acceptance length)
  get a seeded percentile bootstrap that resamples whole windows, since tokens
  within a window are not independent.

Every result says what it is: the dictionaries returned by ``as_stat`` carry
the test's name, its sidedness, its correction and, for intervals, method and
level, so that renderers print them and JSON readers get them as fields. A
result that cannot be computed says why in ``note``.

Every 2x2 table is ``[[a, b], [c, d]]``: rows are the groups compared (first
row = the group of interest), columns are outcome yes / no.

scipy and statsmodels are imported inside the functions: together they take
seconds to import, and commands that print no statistics (``--help``) should
not wait for them.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

__all__ = [
    "BootstrapResult",
    "CMHResult",
    "FisherResult",
    "HomogeneityResult",
    "RowsTestResult",
    "bootstrap_ratio",
    "breslow_day_test",
    "cmh_test",
    "fisher_exact_2x2",
    "fisher_freeman_halton",
    "holm_adjust",
    "interval_stat",
    "poisson_rate_interval",
    "wilson_interval",
    "with_wilson",
]

WILSON = "Wilson score"
CONFIDENCE = 0.95
SEED = 0  # every resampling method starts from this seed: the same input gives the same bytes
MONTE_CARLO_TABLES = 9_999
BOOTSTRAP_RESAMPLES = 2_000


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for the proportion ``successes / n``.

    Returns ``(low, high)``, both within [0, 1]. With ``n == 0`` there is no
    estimate and the result is ``(nan, nan)``.

    Wilson rather than Wald: the rates we publish are often a few per cent or
    per mille (15 invalidated of 2,127). The Wald interval p ± z·sqrt(p(1-p)/n)
    has zero width at 0 of n and undercovers badly near 0 and 1; the Wilson
    interval inverts the score test instead, so ``0/10`` still gives a useful
    upper bound (0.2775) and coverage stays close to nominal for small n.
    """
    from statsmodels.stats.proportion import proportion_confint

    _check_count(successes, n)
    if n == 0:
        return (math.nan, math.nan)
    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    low, high = _exact_ends(low, high, successes, n)
    return (float(low), float(high))


POISSON = "exact Poisson (Garwood)"


def poisson_rate_interval(count: int, exposure: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Garwood) interval of the rate ``count / exposure`` of a Poisson count (engine deaths per
    hour): chi-square quantiles of the count, divided by the exposure; 0 events still give an upper bound.
    ``(nan, nan)`` without exposure."""
    from scipy import stats as scipy_stats

    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not exposure > 0:
        return (math.nan, math.nan)
    alpha = 1 - confidence
    low = 0.0 if count == 0 else float(scipy_stats.chi2.ppf(alpha / 2, 2 * count)) / 2
    high = float(scipy_stats.chi2.ppf(1 - alpha / 2, 2 * count + 2)) / 2
    return (low / exposure, high / exposure)


def _exact_ends(low, high, successes, n):
    """The Wilson bounds with their exact ends: 0 of n has a lower bound of exactly 0 and n of n an upper
    bound of exactly 1, where statsmodels' floating point leaves a residue of about 1e-17."""
    return np.where(successes == 0, 0.0, low), np.where(successes == n, 1.0, high)


def with_wilson(
    df: pl.DataFrame,
    successes_col: str,
    n_col: str,
    prefix: str = "ci",
    confidence: float = CONFIDENCE,
) -> pl.DataFrame:
    """``df`` with Wilson interval columns ``{prefix}_low`` and ``{prefix}_high`` added.

    The interval is for ``successes_col / n_col`` on every row, computed in one
    vectorised statsmodels call. Rows where ``n_col`` is 0 or either count is
    null get null bounds (no estimate), so renderers show them as missing.
    Raises ``ValueError`` if a count is negative or successes exceed n.

    Renderers pair ``ci_low``/``ci_high`` with the frame's rate column: name the
    prefix after the rate (``invalid_rate`` → ``prefix="invalid_rate_ci"``)
    when a frame has more than one rate. ``interval_stat`` describes the columns.
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
        from statsmodels.stats.proportion import proportion_confint

        wilson_low, wilson_high = proportion_confint(
            successes[estimable], n[estimable], alpha=1 - confidence, method="wilson"
        )
        low[estimable], high[estimable] = _exact_ends(
            wilson_low,
            wilson_high,
            successes[estimable],
            n[estimable],
        )
    return df.with_columns(
        pl.Series(f"{prefix}_low", low, dtype=pl.Float64).fill_nan(None),
        pl.Series(f"{prefix}_high", high, dtype=pl.Float64).fill_nan(None),
    )


def interval_stat(
    of: str,
    columns: tuple[str, str] = ("ci_low", "ci_high"),
    method: str = WILSON,
    confidence: float = CONFIDENCE,
    note: str | None = None,
    **details: Any,
) -> dict[str, Any]:
    """What the interval columns of a table are: ``{"interval": "Wilson score", "level": 0.95, ...}``."""
    stat = {"interval": method, "level": confidence, "of": of, "columns": list(columns), **details}
    return stat | ({"note": note} if note else {})


@dataclass(frozen=True)
class FisherResult:
    """Fisher's exact test on one 2x2 table.

    ``odds_ratio`` is the sample odds ratio ``a*d / (b*c)`` (0 or inf when a
    cell is empty, nan when a row or column is empty); ``p_value`` is exact.
    ``note`` says why the odds ratio is infinite or undefined.
    """

    odds_ratio: float
    p_value: float
    alternative: str = "two-sided"
    note: str | None = None

    def as_stat(self, **details: Any) -> dict[str, Any]:
        """A typed, self-describing dictionary: test, sidedness, estimate, p-value, note."""
        return _stat("Fisher exact", self, **details)


def fisher_exact_2x2(a: int, b: int, c: int, d: int, *, alternative: str = "two-sided") -> FisherResult:
    """Fisher exact test of the table ``[[a, b], [c, d]]``, two-sided unless ``alternative`` is
    ``"greater"`` (the odds of the first row are higher: a one-sided question such as "does this build
    vote INVALID more often than the reference") or ``"less"``.

    Exact because evidence tables compare small or very unequal samples (10
    votes against 390) where the chi-square approximation does not hold.
    The two-sided p-value sums the probabilities of all tables with the same
    margins that are no more likely than the one observed.
    """
    from scipy import stats as scipy_stats

    table = np.array([[a, b], [c, d]])
    if np.any(table < 0):
        raise ValueError("2x2 table counts must be non-negative")
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, got {alternative!r}")
    result = scipy_stats.fisher_exact(table, alternative=alternative)
    odds_ratio = float(result.statistic)
    return FisherResult(
        odds_ratio=odds_ratio,
        p_value=float(result.pvalue),
        alternative=alternative,
        note=_odds_ratio_note(odds_ratio, table),
    )


def _odds_ratio_note(odds_ratio: float, table: np.ndarray) -> str | None:
    if math.isnan(odds_ratio):
        if np.any(table.sum(axis=1) == 0):
            return "odds ratio undefined: one group has no observations"
        return "odds ratio undefined: the outcome is all yes or all no in both groups"
    if math.isinf(odds_ratio):
        return "odds ratio infinite: the first group has no 'no' or the second no 'yes' (b·c = 0)"
    if odds_ratio == 0:
        return "odds ratio 0: the first group has no 'yes' or the second no 'no' (a·d = 0)"
    return None


@dataclass(frozen=True)
class RowsTestResult:
    """A test of independence of an r×2 table (groups × outcome yes / no)."""

    statistic: float  # the probability of the observed table under independence (the FFH statistic)
    p_value: float
    groups: int
    monte_carlo_tables: int
    seed: int
    note: str | None = None

    def as_stat(self, **details: Any) -> dict[str, Any]:
        return _stat(
            "Fisher–Freeman–Halton",
            self,
            alternative="two-sided (any difference between groups)",
            p_value_method=f"Monte Carlo, {self.monte_carlo_tables:,} tables, seed {self.seed}",
            **details,
        )


def fisher_freeman_halton(
    rows: Sequence[Sequence[int]], seed: int = SEED, tables: int = MONTE_CARLO_TABLES
) -> RowsTestResult:
    """Fisher–Freeman–Halton test that the outcome share is the same in every row of ``rows``.

    The r×2 extension of Fisher's exact test, again because verdict counts are
    small and unequal. Its p-value is estimated from ``tables`` random tables
    with the observed margins (scipy ``fisher_exact`` with a ``MonteCarloMethod``
    seeded by ``seed``), so it is reproducible and never below 1/(tables + 1).
    Rows without observations are left out; fewer than two rows left, or an
    outcome that never (or always) occurs, leave nothing to test (nan, with a note).
    """
    from scipy import stats as scipy_stats

    table = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
    if np.any(table < 0):
        raise ValueError("counts must be non-negative")
    table = table[table.sum(axis=1) > 0]
    nan = math.nan
    if table.shape[0] < 2:
        return RowsTestResult(
            nan, nan, table.shape[0], tables, seed, note="needs at least two groups with observations"
        )
    if np.any(table.sum(axis=0) == 0):
        return RowsTestResult(
            nan,
            nan,
            table.shape[0],
            tables,
            seed,
            note="nothing to compare: the outcome is all yes or all no in every group",
        )
    method = scipy_stats.MonteCarloMethod(n_resamples=tables, rng=np.random.default_rng(seed))
    result = scipy_stats.fisher_exact(table, method=method)
    p = float(result.pvalue)
    floor = 1 / (tables + 1)
    note = f"p at the Monte Carlo floor 1/{tables + 1:,}: the exact p is smaller" if p <= floor * (1 + 1e-9) else None
    return RowsTestResult(float(result.statistic), p, table.shape[0], tables, seed, note=note)


@dataclass(frozen=True)
class CMHResult:
    """Cochran–Mantel–Haenszel test over strata of 2x2 tables.

    ``statistic`` is the MH chi-square (1 df), ``p_value`` its upper tail,
    ``pooled_odds_ratio`` the Mantel–Haenszel common odds ratio with its
    Robins–Breslow–Greenland confidence interval ``or_ci_low``..``or_ci_high``.
    ``strata_used`` / ``strata_dropped`` count the tables kept and the tables
    dropped because one group had no observations in them. ``corrected``: the
    continuity correction was applied; ``note`` explains a result that is
    missing or infinite.
    """

    statistic: float
    p_value: float
    pooled_odds_ratio: float
    or_ci_low: float
    or_ci_high: float
    strata_used: int
    strata_dropped: int
    corrected: bool = True
    confidence: float = CONFIDENCE
    note: str | None = None

    def as_stat(self, **details: Any) -> dict[str, Any]:
        if math.isnan(self.p_value):
            correction = "not applicable (no test)"
        elif self.corrected:
            correction = "continuity 0.5"
        else:
            correction = "none (|Σ(a − E[a])| < 0.5, where subtracting 0.5 would inflate the statistic)"
        return _stat(
            "Cochran–Mantel–Haenszel",
            self,
            alternative="two-sided",
            correction=correction,
            df=1,
            or_ci_method="Robins–Breslow–Greenland",
            **details,
        )


def cmh_test(
    tables: Sequence[Sequence[Sequence[int]]],
    confidence: float = CONFIDENCE,
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
    from scipy import stats as scipy_stats

    used, dropped = _usable_strata(tables)
    nan = math.nan
    if not used:
        note = "no stratum has observations in both groups" if dropped else "no strata"
        return CMHResult(
            nan,
            nan,
            nan,
            nan,
            nan,
            strata_used=0,
            strata_dropped=dropped,
            corrected=False,
            confidence=confidence,
            note=note,
        )

    corrected = correction and _mh_deviation(used) >= 0.5
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        # Zero sums (every stratum without discordant cells) give 0 or inf odds
        # ratios and nan intervals by design; numpy's warnings add nothing.
        warnings.simplefilter("ignore", RuntimeWarning)
        stratified = _stratified(used)
        test = stratified.test_null_odds(correction=corrected)
        statistic = float(test.statistic)
        p_value = float(scipy_stats.chi2.sf(statistic, df=1))
        pooled = float(stratified.oddsratio_pooled)
        low, high = (float(v) for v in stratified.oddsratio_pooled_confint(alpha=1 - confidence))
    return CMHResult(
        statistic=statistic,
        p_value=p_value,
        pooled_odds_ratio=pooled,
        or_ci_low=low,
        or_ci_high=high,
        strata_used=len(used),
        strata_dropped=dropped,
        corrected=corrected,
        confidence=confidence,
        note=_pooled_note(used, pooled, low, high),
    )


def _pooled_note(used: list[np.ndarray], pooled: float, low: float, high: float) -> str | None:
    """Why the pooled odds ratio or its interval is infinite, zero or missing."""
    ad = sum(t[0, 0] * t[1, 1] / t.sum() for t in used)
    bc = sum(t[0, 1] * t[1, 0] / t.sum() for t in used)
    if ad == 0 and bc == 0:
        return (
            "no test, no pooled odds ratio: no stratum has a discordant pair of cells (a·d = b·c = 0), "
            "so the outcome does not vary within any stratum"
        )
    if bc == 0:
        return (
            "pooled odds ratio infinite, no interval: Σ b·c/n = 0 "
            "(no 'no' in the first group or no 'yes' in the second)"
        )
    if ad == 0:
        return "pooled odds ratio 0, no interval: Σ a·d/n = 0 (no 'yes' in the first group or no 'no' in the second)"
    if math.isnan(low) or math.isnan(high):
        return "interval of the pooled odds ratio undefined (its variance estimate is not finite)"
    return None


@dataclass(frozen=True)
class HomogeneityResult:
    """Breslow–Day test that every stratum has the same odds ratio (chi-square, strata − 1 df)."""

    statistic: float
    p_value: float
    df: int
    note: str | None = None

    def as_stat(self, **details: Any) -> dict[str, Any]:
        return _stat(
            "Breslow–Day",
            self,
            alternative="two-sided (any difference between strata)",
            correction="none (no Tarone adjustment)",
            null="one common odds ratio in every stratum",
            **details,
        )


def breslow_day_test(tables: Sequence[Sequence[Sequence[int]]]) -> HomogeneityResult:
    """Breslow–Day test of homogeneous odds ratios (statsmodels ``test_equal_odds``).

    A pooled odds ratio summarises strata only if they agree: effects of opposite
    sign in different strata (builds, escrows) average out in the pooled estimate
    and this test shows it. Strata where one group has no observations are left
    out as in the CMH test. Strata with an empty cell make the expected counts
    degenerate; fewer than two strata leave nothing to compare.
    """
    used, _ = _usable_strata(tables)
    nan = math.nan
    if len(used) < 2:
        return HomogeneityResult(
            nan,
            nan,
            max(len(used) - 1, 0),
            note=f"needs at least two strata with observations in both groups, has {len(used)}",
        )
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = _stratified(used).test_equal_odds(adjust=False)
    statistic, p = float(result.statistic), float(result.pvalue)
    note = None
    if not (math.isfinite(statistic) and math.isfinite(p)):
        statistic = p = nan
        note = (
            "undefined: the expected cell counts under the pooled odds ratio cannot be solved for "
            "(statsmodels' quadratic degenerates when that odds ratio is 0, exactly 1 or infinite)"
        )
    return HomogeneityResult(statistic, p, len(used) - 1, note=note)


def _usable_strata(tables: Sequence[Sequence[Sequence[int]]]) -> tuple[list[np.ndarray], int]:
    arrays = [np.asarray(t, dtype=float) for t in tables]
    for table in arrays:
        if table.shape != (2, 2):
            raise ValueError(f"each stratum must be a 2x2 table, got shape {table.shape}")
        if np.any(table < 0):
            raise ValueError("2x2 table counts must be non-negative")
    used = [t for t in arrays if t[0].sum() > 0 and t[1].sum() > 0]
    return used, len(arrays) - len(used)


def _stratified(used: list[np.ndarray]):
    from statsmodels.stats.contingency_tables import StratifiedTable

    return StratifiedTable(np.stack(used, axis=2))


def _mh_deviation(tables: list[np.ndarray]) -> float:
    """|sum of a - E[a]| over strata, E[a] = row1 total * column1 total / n (the MH numerator)."""
    return abs(sum(t[0, 0] - t[0].sum() * t[:, 0].sum() / t.sum() for t in tables))


def holm_adjust(stats: dict[str, Any]) -> dict[str, Any] | None:
    """Add ``p_holm`` to every test in ``stats`` (a table's statistics) and describe the family.

    Every test result in ``stats`` that has a p-value, at the top level or one
    level down (per-build results), is one member of the family: a table that
    runs several tests would otherwise find something at 5% by chance alone.
    Holm (statsmodels ``multipletests(method="holm")``) controls the family-wise
    error rate without assuming the tests independent. Returns the description
    to store under ``multiple_testing``, or None when there are fewer than two tests.
    """
    members: list[tuple[str, dict]] = []
    for name, value in stats.items():
        if _is_test(value):
            members.append((name, value))
        elif isinstance(value, dict):
            members += [(f"{name} ({key})", item) for key, item in value.items() if _is_test(item)]
    if len(members) < 2:
        return None
    for (_, member), p in zip(members, _holm([m["p_value"] for _, m in members]), strict=True):
        member["p_holm"] = float(p)
    return {
        "method": "Holm",
        "controls": "family-wise error rate",
        "tests": len(members),
        "family": [name for name, _ in members],
    }


def _holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, computed as statsmodels' ``multipletests(method="holm")`` computes
    them (the tests compare the two); that call runs a full gc.collect() each time, a tenth of a second or more."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1)), 1.0)
    return adjusted.tolist()


def _is_test(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "test" in value
        and isinstance(value.get("p_value"), float)
        and not math.isnan(value["p_value"])
    )


@dataclass(frozen=True)
class BootstrapResult:
    low: float
    high: float
    windows: int
    resamples: int
    seed: int
    confidence: float = CONFIDENCE
    note: str | None = None


def bootstrap_ratio(
    numerator: Sequence[float],
    denominator: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
    transform: Callable[[np.ndarray], np.ndarray] = lambda r: r,
) -> BootstrapResult:
    """Percentile bootstrap interval of ``transform(Σ numerator / Σ denominator)`` over units (log windows).

    Units are resampled whole, with replacement (scipy ``bootstrap``, ``paired``,
    ``method="percentile"``), because the tokens of one window share a request
    mix and an engine state and are not independent draws; a token-level
    interval would be too narrow. The generator is seeded, so the same windows
    give the same interval byte for byte. Fewer than two units, or a zero
    denominator, give no interval (nan, with a note).
    """
    from scipy import stats as scipy_stats

    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    nan = math.nan
    if len(num) < 2:
        return BootstrapResult(
            nan, nan, len(num), resamples, seed, confidence, note=f"needs at least two windows, has {len(num)}"
        )
    if den.sum() <= 0:
        return BootstrapResult(nan, nan, len(num), resamples, seed, confidence, note="denominator is 0 in every window")

    def ratio(n: np.ndarray, d: np.ndarray, axis: int = -1) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return transform(n.sum(axis=axis) / d.sum(axis=axis))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_stats.bootstrap(
            (num, den),
            ratio,
            paired=True,
            vectorized=True,
            n_resamples=resamples,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    note = None
    if not (math.isfinite(low) and math.isfinite(high)):
        low = high = nan
        note = "undefined: some resamples have a zero denominator"
    elif low == high:
        note = "zero width: every window has the same ratio"
    return BootstrapResult(low, high, len(num), resamples, seed, confidence, note=note)


def _stat(test: str, result: Any, **details: Any) -> dict[str, Any]:
    """``{"test": name, **details, **fields of result}``, without an empty note."""
    fields = dataclasses.asdict(result)
    if fields.get("note") is None:
        fields.pop("note", None)
    fields.pop("corrected", None)  # published as the words of ``correction``
    return {"test": test, **details, **fields}


def _check_count(successes: int, n: int) -> None:
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
