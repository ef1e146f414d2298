"""Mean and 95 % confidence interval of a figure over seeds (pure).

Each seed is one independent run (its own events, Placement order and
host order), so a figure's values over the seeds are a sample: the
interval is the mean plus or minus Student's t (two-sided 95 %, n - 1
degrees of freedom) times the standard error ``s / sqrt(n)``. The t
quantiles are the standard table values (e.g. NIST/SEMATECH e-Handbook of
Statistical Methods, section 1.3.6.7.2, "Critical Values of the Student's
t Distribution"); between two listed degrees of freedom the smaller one's
(wider) value is used.
"""

import dataclasses
import math
import statistics

#: Two-sided 95 % quantiles t(0.975, df) for df = 1 .. 30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
         2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
         2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
         2.048, 2.045, 2.042)
#: Beyond 30: (from df, quantile); 120 and more use t(0.975, 120).
_T975_LARGE = ((40, 2.021), (60, 2.000), (120, 1.980))


def t975(df):
    """Student's t quantile for a two-sided 95 % interval, ``df`` >= 1."""
    if df <= len(_T975):
        return _T975[df - 1]
    value = _T975[-1]
    for limit, quantile in _T975_LARGE:
        if df >= limit:
            value = quantile
    return value


@dataclasses.dataclass(frozen=True)
class Interval:
    """A figure over ``n`` seeds: mean, and the 95 % interval of the mean.

    ``low`` and ``high`` are None with fewer than 2 values; ``mean`` is
    None with none (e.g. the share of servers placed on one domain when no
    server of that size was placed in any seed).
    """
    mean: float
    low: float
    high: float
    n: int


def interval(values):
    """:class:`Interval` of ``values`` (None values are left out)."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return Interval(None, None, None, 0)
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Interval(mean, None, None, 1)
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(
        len(values))
    return Interval(mean, mean - half, mean + half, len(values))
