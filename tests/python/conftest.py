"""pytest set-up for the Python package's tests (run by ctest, label python).

Hypothesis runs derandomized (the same examples every run, so CI is reproducible and a failure
replays with the same command) with a modest number of examples and no deadline: certification
time varies with the shape. `HYPOTHESIS_PROFILE=thorough` runs 20x more, randomized; Hypothesis
then prints the seed and a reproduction blob (`@reproduce_failure`) with any failure.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=25, derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                          print_blob=True)
settings.register_profile("thorough", max_examples=500, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
