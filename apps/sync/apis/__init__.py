"""The incremental sync API, settings and extension data."""
