"""pipeline.evidence.stats against published worked examples, plus invariants."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.evidence.stats import cmh_test, fisher_exact_2x2, wilson_interval, with_wilson

# pipeline.evidence.stats imports scipy/statsmodels on first use, so the first example of a property test
# pays seconds of imports on a loaded machine; these tests check numbers, not timings.
no_deadline = settings(deadline=None)


# --- Wilson ---------------------------------------------------------------


def test_wilson_newcombe_81_of_263():
    # Newcombe (1998), Stat Med 17:857-872, Table I example (81/263), method 3 (score).
    low, high = wilson_interval(81, 263)
    assert round(low, 4) == 0.2553
    assert round(high, 4) == 0.3662


def test_wilson_zero_of_ten():
    # Newcombe (1998) Table I, 0/10, score method: 0 to 0.2775.
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert round(high, 4) == 0.2775


def test_wilson_ends_are_exact_at_zero_and_all():
    # 0 of 14 has a lower bound of exactly 0 and 14 of 14 an upper bound of exactly 1 (statsmodels' floating
    # point leaves 1.4e-17 and 1 - 1.1e-16 there); the other bound is statsmodels' own.
    from statsmodels.stats.proportion import proportion_confint

    assert wilson_interval(0, 14) == (0.0, pytest.approx(proportion_confint(0, 14, method="wilson")[1], rel=1e-15))
    assert wilson_interval(14, 14) == (pytest.approx(proportion_confint(14, 14, method="wilson")[0], rel=1e-15), 1.0)
    out = with_wilson(pl.DataFrame({"k": [0, 14, 3], "n": [14, 14, 14]}), "k", "n")
    assert out["ci_low"].to_list()[0] == 0.0 and out["ci_high"].to_list()[1] == 1.0
    assert out.row(2)[2:] == pytest.approx(proportion_confint(3, 14, method="wilson"), rel=1e-15)


def test_wilson_empty_sample_is_nan():
    low, high = wilson_interval(0, 0)
    assert math.isnan(low) and math.isnan(high)


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
    with pytest.raises(ValueError):
        wilson_interval(-1, 10)


@no_deadline
@given(st.integers(min_value=1, max_value=100_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_estimate_and_stays_in_unit_interval(case):
    k, n = case
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= high <= 1.0
    # statsmodels computes the bounds in floating point; allow an ulp at k=0 / k=n.
    assert low - 1e-12 <= k / n <= high + 1e-12


def test_with_wilson_adds_columns_matching_scalar_version():
    df = pl.DataFrame({"invalid": [81, 0, 0, None], "judged": [263, 10, 0, 5]})
    out = with_wilson(df, "invalid", "judged")
    assert out.columns == ["invalid", "judged", "ci_low", "ci_high"]
    low, high = wilson_interval(81, 263)
    assert out.row(0) == (81, 263, pytest.approx(low, abs=1e-15), pytest.approx(high, abs=1e-15))
    assert out["ci_low"][1] == 0.0
    assert round(out["ci_high"][1], 4) == 0.2775
    # n == 0 and null counts: no estimate, null rather than NaN
    assert out["ci_low"][2:].to_list() == [None, None]
    assert out["ci_high"][2:].to_list() == [None, None]


def test_with_wilson_prefix_and_empty_frame():
    df = pl.DataFrame({"k": [1], "n": [4]})
    assert with_wilson(df, "k", "n", prefix="invalid_rate_ci").columns == [
        "k",
        "n",
        "invalid_rate_ci_low",
        "invalid_rate_ci_high",
    ]
    empty = pl.DataFrame(schema={"k": pl.Int64, "n": pl.Int64})
    out = with_wilson(empty, "k", "n")
    assert out.height == 0 and out.columns == ["k", "n", "ci_low", "ci_high"]


def test_with_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError):
        with_wilson(pl.DataFrame({"k": [5], "n": [4]}), "k", "n")


# --- Fisher -------------------------------------------------------------------


def test_fisher_lady_tasting_tea():
    # Fisher (1935), The Design of Experiments: 4 of 4 cups, 3 right each way.
    result = fisher_exact_2x2(3, 1, 1, 3)
    assert round(result.p_value, 4) == 0.4857
    assert result.odds_ratio == 9.0
    assert result.alternative == "two-sided"


def test_fisher_empty_row_gives_p_one():
    result = fisher_exact_2x2(0, 0, 5, 7)
    assert result.p_value == 1.0


counts = st.integers(min_value=0, max_value=60)


@no_deadline
@given(counts, counts, counts, counts)
def test_fisher_p_symmetric_under_row_and_column_swaps(a, b, c, d):
    p = fisher_exact_2x2(a, b, c, d).p_value
    assert math.isclose(fisher_exact_2x2(c, d, a, b).p_value, p, rel_tol=1e-9)  # rows swapped
    assert math.isclose(fisher_exact_2x2(b, a, d, c).p_value, p, rel_tol=1e-9)  # columns swapped


# --- Cochran–Mantel–Haenszel ---------------------------------------------------

# Penicillin and rabbits: Agresti (1990), Categorical Data Analysis, p. 233,
# the example of R's ?mantelhaen.test ("Rabbits"). R reports, with continuity
# correction: Mantel-Haenszel X-squared = 3.9286, df = 1, p-value = 0.04747,
# common odds ratio 7, 95% CI 1.026713 to 47.725133.
# Rows: injection immediately / 1.5 h delayed; columns: cured / died; one
# table per penicillin level.
RABBITS = [
    [[0, 6], [0, 5]],
    [[3, 3], [0, 6]],
    [[6, 0], [2, 4]],
    [[5, 1], [6, 0]],
    [[2, 0], [5, 0]],
]

# Lung cancer and smoking in eight Chinese cities (Liu 1992), the worked example
# of the statsmodels contingency-table docs: pooled odds 2.174 (1.984, 2.383),
# "Test of OR=1" 280.138 (without continuity correction).
# Rows: smoker / non-smoker; columns: cancer / no cancer.
CHINA_SMOKING = [
    [[126, 100], [35, 61]],
    [[908, 688], [497, 807]],
    [[913, 747], [336, 598]],
    [[235, 172], [58, 121]],
    [[402, 308], [121, 215]],
    [[182, 156], [72, 98]],
    [[60, 99], [11, 43]],
    [[104, 89], [21, 36]],
]


def test_cmh_rabbits_matches_r_mantelhaen_test():
    result = cmh_test(RABBITS)
    assert round(result.statistic, 4) == 3.9286
    assert round(result.p_value, 5) == 0.04747
    assert result.pooled_odds_ratio == pytest.approx(7.0)
    assert round(result.or_ci_low, 4) == 1.0267
    assert round(result.or_ci_high, 4) == 47.7251
    assert (result.strata_used, result.strata_dropped) == (5, 0)


def test_cmh_china_smoking_matches_statsmodels_docs():
    uncorrected = cmh_test(CHINA_SMOKING, correction=False)
    assert round(uncorrected.statistic, 3) == 280.138
    assert round(uncorrected.pooled_odds_ratio, 3) == 2.174
    assert round(uncorrected.or_ci_low, 3) == 1.984
    assert round(uncorrected.or_ci_high, 3) == 2.383
    # The tail p-value keeps its precision instead of rounding to 0.
    assert 0 < uncorrected.p_value < 1e-60
    assert cmh_test(CHINA_SMOKING).statistic < uncorrected.statistic


def test_cmh_drops_strata_with_an_empty_group():
    with_empty = [*RABBITS, [[0, 0], [4, 2]], [[3, 1], [0, 0]]]
    result = cmh_test(with_empty)
    assert (result.strata_used, result.strata_dropped) == (5, 2)
    assert result.statistic == pytest.approx(cmh_test(RABBITS).statistic)


def test_cmh_all_strata_dropped_is_nan():
    result = cmh_test([[[0, 0], [1, 2]], [[0, 0], [0, 0]]])
    assert result.strata_used == 0 and result.strata_dropped == 2
    assert all(math.isnan(v) for v in (result.statistic, result.p_value, result.pooled_odds_ratio))
    assert math.isnan(result.or_ci_low) and math.isnan(result.or_ci_high)
    empty = cmh_test([])
    assert (empty.strata_used, empty.strata_dropped) == (0, 0)


def test_cmh_correction_skipped_for_tiny_deviation():
    # Observed a equals its expectation: corrected statistic must be 0, not 0.25/var.
    result = cmh_test([[[2, 2], [2, 2]]])
    assert result.statistic == 0.0
    assert result.p_value == 1.0


def test_cmh_rejects_non_2x2():
    with pytest.raises(ValueError):
        cmh_test([[[1, 2, 3], [4, 5, 6]]])


tables_2x2 = st.lists(
    st.tuples(st.integers(1, 40), st.integers(0, 40), st.integers(1, 40), st.integers(0, 40)).map(
        lambda t: [[t[0], t[1]], [t[2], t[3]]]
    ),
    min_size=1,
    max_size=8,
)


@no_deadline
@given(tables_2x2, st.randoms(use_true_random=False))
def test_cmh_invariant_under_reordering_strata(tables, rnd):
    shuffled = list(tables)
    rnd.shuffle(shuffled)
    a, b = cmh_test(tables), cmh_test(shuffled)
    for x, y in [(a.statistic, b.statistic), (a.p_value, b.p_value), (a.pooled_odds_ratio, b.pooled_odds_ratio)]:
        assert (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
