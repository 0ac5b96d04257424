"""The app shell's parts, mixed into ``MemoryApp`` by responsibility: loading and watching
the model, the job flow, navigation between views, problems."""
