"""The Hypothesis profile of the property tests.

Deterministic: ``derandomize`` draws the same examples on every run and no
example database is read or written, so a failure in CI is a failure on a
laptop, and nothing is left in the work tree. ``deadline=None`` because the
machine is noisy (timings are never asserted). ``max_examples`` keeps the
property tests, all together, within their share of ``make test`` (about
30 s); a test that needs fewer or more says so with its own ``@settings``.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "gateway-property",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("gateway-property")
