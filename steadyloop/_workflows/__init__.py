"""Deterministic workflow code only: no I/O, wall clock, randomness or threads here."""
