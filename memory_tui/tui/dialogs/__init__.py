"""Modal dialogs: confirm, conflict, record-op pickers."""
