"""Benchmarks that reproduce the papers' tables."""
