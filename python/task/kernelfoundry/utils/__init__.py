"""Task-side utilities of the reference's ``kernelfoundry.utils`` package: ``performance`` (runtime measurement,
profiler control) and ``sysinfo`` (GPU discovery, tool versions). Importing this package imports nothing."""
