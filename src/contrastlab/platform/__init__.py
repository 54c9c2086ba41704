"""The core everything plugs into: hook specs, plugin manager, registries, configs, runs and the CLI."""
