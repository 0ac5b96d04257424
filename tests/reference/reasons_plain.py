"""The reasons engine computed the straightforward way: every tip over its own walk from the
root (session spec §4.2-§4.4), every turn of every tip on its own, every node's best verdict
ranked over all of them. Production shares the work between tips (walks reused through the
common prefix, tip-independent verdicts decided once, verdicts computed when looked up); this
is the specification that shared path must equal, and
``tests/property/test_reasons_shared_props.py`` compares the two on random session DAGs.

Only tests import this module. The tip and session reasons themselves are production's
(``reasons.tip_reasons``/``session_reasons``): what is checked here is which nodes, records
and marks each tip sees, and which tip's verdict each node keeps.
"""

from __future__ import annotations

from memory_tui.core.format.tokens import TokenCounter
from memory_tui.sessions.dag import Branch, forced_pass_branch_order, list_branches, tips_of, walk_chain
from memory_tui.sessions.reasons import (
    NEVER,
    PENDING,
    WRITTEN,
    Evidence,
    Reason,
    SessionExplanation,
    TipExplanation,
    TurnVerdict,
    WriterContext,
    not_record_reason,
    offline_verdict,
    session_reasons,
    tip_reasons,
)
from memory_tui.sessions.records import (
    MARK_KEY,
    CachedCounter,
    SessionAnalysis,
    TipAnalysis,
    cached_counter,
    foreign_marked,
    marked_ids,
    records_for,
    tip_analysis,
)
from memory_tui.sessions.store import Session

_RANK = {WRITTEN: 2, PENDING: 1, NEVER: 0}


def analyze_tip_plain(
    session: Session,
    tip: str,
    workspace_id: str,
    threshold: int,
    counter: TokenCounter | CachedCounter | None = None,
    rows: tuple[Branch, ...] | None = None,
    cache: dict | None = None,
) -> TipAnalysis:
    """One tip over its own walk: what ``records.analyze_tip`` must equal."""
    cc = cached_counter(counter)
    rows = list_branches(session) if rows is None else rows
    chain = walk_chain(session, tip)
    branch = tuple(n for n in chain.nodes if not n.is_root and not n.rewound)
    rs = records_for(session, branch, cache)
    marked = marked_ids(branch, workspace_id)
    return tip_analysis(session, tip, threshold, cc, rows, chain, branch, rs, marked,
                        foreign_marked(rs.records, workspace_id))


def analyze_session_plain(
    session: Session,
    workspace_id: str,
    threshold: int,
    counter: TokenCounter | CachedCounter | None = None,
) -> SessionAnalysis:
    """``records.analyze_session`` with every tip computed on its own."""
    cc = cached_counter(counter)
    rows = list_branches(session)
    order = forced_pass_branch_order(session, rows)
    analyses = {t: analyze_tip_plain(session, t, workspace_id, threshold, cc, rows) for t in tips_of(session, rows)}
    return SessionAnalysis(session, rows, order, analyses)


def _r(code: str, message: str, *evidence: Evidence) -> Reason:
    return Reason(code, tuple(evidence), message)


def turns_for_tip_plain(sa: SessionAnalysis, ta: TipAnalysis, treasons: list[Reason], ctx: WriterContext,
                        memo: dict | None = None) -> tuple[TurnVerdict, ...]:
    """Per-turn verdicts on one tip, computed on their own. ``memo`` shares the verdicts that
    cannot depend on the tip between tips (the first tip to see a node names it)."""
    memo = {} if memo is None else memo
    pending_ids = {r.id for r in ta.pending}
    stranded_ids = {r.id for r in ta.stranded}
    foreign_ids = {r.id for r in ta.foreign}
    records = {r.id: r for r in ta.recordset.records}
    never_archived = ta.archived and not ta.is_head
    turns: list[TurnVerdict] = []
    for node in ta.chain:
        if node.is_root:
            continue
        if node.rewound:
            key = (node.id, "rewound")
            if key not in memo:
                memo[key] = TurnVerdict(node.id, node.role, NEVER, (
                    _r("rewound", "the turn was rewound; every branch and message view hides it",
                       Evidence(node.file, "metadata.rewound", True)),), ta.tip)
            turns.append(memo[key])
            continue
        code = ta.recordset.excluded.get(node.id)
        if code is not None:
            key = (node.id, code)
            if key not in memo:
                memo[key] = TurnVerdict(node.id, node.role, NEVER, (not_record_reason(node, code, ta),), ta.tip)
            turns.append(memo[key])
            continue
        rec = records.get(node.id)
        if rec is None:  # pragma: no cover - every branch node is a record or excluded
            continue
        local: list[Reason] = []
        if node.id in foreign_ids:
            mark = node.metadata.get(MARK_KEY)
            local.append(_r("marked_other_workspace",
                            f"marked by workspace {mark}, not this one ({ctx.workspace_id}): it counts as unwritten and will be re-written",
                            Evidence(node.file, f"metadata.{MARK_KEY}", mark)))
        if node.id in ta.marked:
            key = (node.id, "written")
            if key not in memo:
                memo[key] = TurnVerdict(node.id, node.role, WRITTEN, (
                    _r("written", "handed to a writer run that changed memory (marked with this workspace id)",
                       Evidence(node.file, f"metadata.{MARK_KEY}", ctx.workspace_id)),), ta.tip)
            turns.append(memo[key])
        elif node.id in stranded_ids:
            stranded = next(r for r in treasons if r.code == "stranded_behind_mark")
            turns.append(TurnVerdict(node.id, node.role, NEVER, (
                _r("stranded_behind_mark", "unmarked, but older than a newer mark on this branch: never offered again",
                   Evidence(node.file, f"metadata.{MARK_KEY}", node.metadata.get(MARK_KEY)), *stranded.evidence[-1:]),
                *local), ta.tip))
        elif node.id in pending_ids:
            toks = ta.special_tokens.get(node.id)
            if toks:
                local.append(_r("special_token_blocks_writer",
                                f"contains {', '.join(toks)}: OpenProgram's counter raises and the session write fails",
                                Evidence(node.file, "output", list(toks))))
            others = [r for r in treasons if r.code not in ("stranded_behind_mark", "runtime_turns_only")]
            verdict = NEVER if never_archived else PENDING
            turns.append(TurnVerdict(node.id, node.role, verdict, tuple(local + others), ta.tip))
    return tuple(turns)


def explain_session_plain(session: Session, ctx: WriterContext,
                          counter: TokenCounter | CachedCounter | None = None) -> SessionExplanation:
    """Every tip's and turn's verdict, each tip on its own; a node keeps the best verdict any
    tip gives it (written over pending over never; among equals the first tip in order, unless
    the head is among them), else its offline verdict."""
    cc = cached_counter(counter)
    sa = analyze_session_plain(session, ctx.workspace_id, ctx.config.trigger_tokens, cc)
    sreasons = session_reasons(session, sa, ctx)
    tips: dict[str, TipExplanation] = {}
    best: dict[str, TurnVerdict] = {}
    memo: dict = {}
    for tip, ta in sa.tips.items():
        treasons = tip_reasons(sa, ta, ctx, sreasons)
        turns = turns_for_tip_plain(sa, ta, treasons, ctx, memo)
        tips[tip] = TipExplanation(ta, tuple(treasons), turns)
        for tv in turns:
            old = best.get(tv.id)
            if old is None or _RANK[tv.verdict] > _RANK[old.verdict] or (
                _RANK[tv.verdict] == _RANK[old.verdict] and tip == session.head_id
            ):
                best[tv.id] = tv
    nodes: dict[str, TurnVerdict] = {}
    for nid in session.order:
        node = session.nodes[nid]
        if not node.is_root:
            nodes[nid] = best.get(nid) or offline_verdict(session, node)
    runtime_only = tuple(t for t, ta in sa.tips.items() if ta.runtime_only)
    return SessionExplanation(sa, tuple(sreasons), tips, nodes, runtime_only)
