"""Benchmarks and the fixture generators they use (not part of the installed package)."""
