"""PySpark jobs of the lifecycle store: lake export and lifecycle analytics over sealed segments.

Run one with ``python -m spark_jobs <job> [options]``; ``python -m spark_jobs --help`` lists them.
Each job is a module in :mod:`spark_jobs.jobs`: pure DataFrame transforms plus a ``main`` that wires
the session (:mod:`spark_jobs.session`), the config (:mod:`spark_jobs.config`) and the I/O.
"""

from spark_jobs.registry import Job, get_job, jobs, load_jobs, register

__all__ = ["Job", "get_job", "jobs", "load_jobs", "register"]
