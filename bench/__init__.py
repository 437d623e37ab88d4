"""Benchmarks for taskqueue: ``python -m bench SCENARIO``. Benchmarks are not tests."""
