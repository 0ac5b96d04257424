"""``memory-tui why SESSION --graph`` draws the Sessions layout; the text form carries each
turn's first line and every reason's evidence; a tip's summary agrees with its turns."""

from __future__ import annotations

from memory_tui.cli import main
from memory_tui.sessions import graph as G
from memory_tui.sessions.reasons import explain, load_context
from memory_tui.sessions.kept import citations_for_state
from memory_tui.sessions.links import SpawnLinks, session_decorations
from memory_tui.sessions.store import load_sessions

NOW = "1796100000"


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_graph_is_the_layout_the_view_draws(fixture_state_ro, capsys):
    for ascii_ in (False, True):
        argv = ["--state", str(fixture_state_ro), "why", "local_f6e5d4c3b2", "--graph", "--width", "200", "--now", NOW]
        rc, out, err = run(capsys, *argv, *(["--ascii"] if ascii_ else []))
        assert rc == 0, err
        snap = load_sessions(fixture_state_ro)
        ctx = load_context(fixture_state_ro, now=float(NOW))
        ex = explain(snap, ctx)
        se = ex.sessions["local_f6e5d4c3b2"]
        # the view's layout, with what it draws beyond the session's files (kept states, the
        # cross-session spawn's other half)
        deco = session_decorations(se.session, citations_for_state(fixture_state_ro)[0], ctx.workspace_id,
                                   SpawnLinks.of(snap))
        want = G.draw(G.layout_session(se, None, None, deco), ascii=ascii_, max_lanes=16, width=200)
        assert any(line.startswith(("⇄", "&")) or " ⇄ " in line or " & " in line for line in want)
        lines = out.splitlines()
        assert lines[1:1 + len(want)] == want
        assert lines[0].startswith("session local_f6e5d4c3b2")
        assert "legend" in lines and G.legend_lines(ascii_)[0] in out
        assert out.isascii() == ascii_


def test_graph_newest_first(fixture_state_ro, capsys):
    rc, out, _ = run(capsys, "--state", str(fixture_state_ro), "why", "local_a1b2c3d4e5", "--graph", "--newest-first",
                     "--ascii", "--width", "200", "--now", NOW)
    body = out.splitlines()[1:out.splitlines().index("")]
    assert rc == 0 and body[0].startswith("= summary_601f10339a") and body[-1].startswith("#") and body[-1].endswith("ROOT  ROOT")
    assert any("tool bash" in line for line in body)  # a single tool row is not folded


def test_text_form_shows_turn_text_and_evidence(fixture_state_ro, capsys):
    rc, out, err = run(capsys, "--state", str(fixture_state_ro), "why", "local_f6e5d4c3b2", "--now", NOW)
    assert rc == 0, err
    assert '"Compare Python and Rust for a CLI tool."' in out
    assert "evidence sessions/local_f6e5d4c3b2/meta.json branches.b00000000002_reply.archived = true" in out
    assert "evidence sessions/local_f6e5d4c3b2/history/0001-u-b00000000001.json metadata.memory_written_scriptorium" in out


def test_archived_tip_is_not_reported_pending(fixture_state_ro, capsys):
    rc, out, _ = run(capsys, "--state", str(fixture_state_ro), "why", "local_f6e5d4c3b2", "--now", NOW)
    tip = next(line for line in out.splitlines() if line.startswith("  tip b00000000002_reply"))
    assert "0 pending" in tip and "2 unwritten and never written (20 tokens held)" in tip
    turns = [line for line in out.splitlines() if line.startswith("    - never   b00000000002")]
    assert len(turns) == 2
