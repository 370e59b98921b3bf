"""The typed, versioned run record (attempts, cells, the run), its latency histograms, and where its files go. May
import system and settings."""
