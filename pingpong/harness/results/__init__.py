"""The typed, versioned run record (attempts, cells, the run), its latency histograms, where its files go and how a
stored one is read (plain or compressed). May import system and settings."""
