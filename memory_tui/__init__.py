"""memory-tui: a terminal client for OpenProgram's memory workspace."""

__version__ = "0.1.0"


_INTENTS = ("marks-pending.json", "migrate-pending.json")  # pipeline.recovery's files


def _finish_interrupted_jobs(memory_root) -> None:
    import os

    from memory_tui.core.format.paths import Layout

    rt = Layout(memory_root).runtime_dir
    if not any(os.path.lexists(os.path.join(rt, n)) for n in _INTENTS):
        return  # the usual open: no job was killed, and the pipeline is not even imported
    from memory_tui.pipeline.recovery import finish_interrupted

    finish_interrupted(memory_root)


def _wire() -> None:
    # Every locked open (core's ``install.recover``) finishes what a killed job left: core
    # cannot import the session model that needs, so the package root wires it in.
    from memory_tui.core.store import openhooks

    openhooks.register(_finish_interrupted_jobs)


_wire()
