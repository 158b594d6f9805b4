"""Reliability drills: bad inputs, kill -9, store failures, and a model-based simulation."""
