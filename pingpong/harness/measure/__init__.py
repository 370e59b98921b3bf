"""Measuring on this machine: a server started and verified, an attempt's clients and window, the judge of its
outcome, and the engine's rounds over every cell. May import system, settings, results, analysis and report."""
