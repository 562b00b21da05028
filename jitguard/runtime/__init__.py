"""The runtime watcher: hooks on Triton's compile path, key decoding and diffs, traces."""
