"""memory-tui: a terminal client for OpenProgram's memory workspace."""

__version__ = "0.1.0"


def _finish_interrupted_jobs(memory_root) -> None:
    # imported only when a locked open runs: reading never pays for the pipeline
    from memory_tui.pipeline.recovery import finish_interrupted

    finish_interrupted(memory_root)


def _wire() -> None:
    # Every locked open (core's ``install.recover``) finishes what a killed job left: core
    # cannot import the session model that needs, so the package root wires it in.
    from memory_tui.core.store import openhooks

    openhooks.register(_finish_interrupted_jobs)


_wire()
