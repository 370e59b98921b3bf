"""Servers that run --workers N processes on one port, a room's members on other workers reached through Redis."""
