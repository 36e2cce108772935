"""Benchmarks comparing slot streaming with native json_schema streaming."""
