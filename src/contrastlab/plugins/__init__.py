"""First-party task plugins; each subpackage registers itself through the register_plugins hook."""
