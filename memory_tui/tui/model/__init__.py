"""The app's adapters: what the screens draw, built from core, sessions, insights and the
pipeline. Frozen view models and plain functions, so a worker thread can build them and a
test can check them without an app; screens and widgets never call the engine themselves.

``data`` the workspace model (topics, records, timeline, core, status, insights entry
points), ``sessions`` the Sessions view's model, ``insights`` evidence/history/alternatives
rows, ``editor`` the topic editor's validate/save, ``records`` the record actions.
"""
