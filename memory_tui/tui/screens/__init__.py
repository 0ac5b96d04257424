"""One module per view; each screen handles its own events."""
