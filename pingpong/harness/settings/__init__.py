"""What a run is asked to do: the manifest and its implementations, the options resolved into a run's configuration
and each attempt's CellSettings, the round policy, the machine's environment. May import system."""
