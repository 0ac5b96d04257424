"""OpenProgram session store reader: nodes, branches, records, pending, marks, reasons.

Public entry points (see each module for details)::

    from memory_tui.sessions.store import load_sessions, Session, Node, SessionSnapshot
    from memory_tui.sessions.dag import get_branch, list_branches, forced_pass_branch_order, trunk_tip
    from memory_tui.sessions.records import analyze_session, analyze_tip, status_pending_count
"""
