"""bench/run's parts: the process runner (runner.py) and the cases (cases.py). The measurements,
the report and the plots are still in bench/run.py."""
