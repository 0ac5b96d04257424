"""OpenProgram session store reader: nodes, branches, records, pending, marks, reasons.

Never imports Textual. Public API::

    from memory_tui.sessions.store import load_sessions, SessionSnapshot, Session, Node
        load_sessions(state_dir, previous=None) -> SessionSnapshot   # incremental with previous
    from memory_tui.sessions.dag import (get_branch, walk_chain, list_branches, trunk_tip,
                                         forced_pass_branch_order, tips_of, to_message, Branch)
    from memory_tui.sessions.records import (analyze_session, analyze_tip, records_for, marked_ids,
                                             pending_records, first_batch, stranded_records,
                                             foreign_marked, status_pending_count)
    from memory_tui.sessions.reasons import (load_context, explain, explain_session, probe_lock,
                                             Reason, Evidence, TurnVerdict, CODES)
    from memory_tui.sessions.marks import mark_nodes, MarkResult
"""
