"""Monitoring: sampled offsets and lag, their history, Burrow-style status, charts."""
