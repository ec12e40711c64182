"""Job modules. Each registers its entry point with :func:`spark_jobs.registry.register`;
:func:`spark_jobs.registry.load_jobs` imports them all."""
