"""Running many envs across hosts (Ray), above the env itself."""
