"""What a transaction derives from the new topic tree and writes into the stage beside it:
``runtime.json``'s creation order (grown, never rewritten when nothing changed: pitfall 1)
and the views (timeline/, core.md, the root files; §8)."""

from __future__ import annotations

from ..format.errors import CORRUPT_FILE, MemoryError, Problem
from ..format.paths import Layout
from ..format.sources import SourceIndex
from ..format.topics import TopicTree, topic_sort_key
from ..store.workspace import RuntimeState, dump_runtime_json, load_runtime_state
from .checks import differing
from .context import Context
from .result import CoreInfo
from .stage import Stage, state_dir


def write_derived(stage: Stage, tree: TopicTree, ctx: Context) -> CoreInfo | None:
    """Write the creation order and the views of ``tree`` into the stage; the core's report."""
    runtime = _write_runtime(stage, tree)
    return _write_views(stage, tree, stage.index, runtime, ctx)


def _write_views(stage: Stage, tree: TopicTree, index: SourceIndex, runtime: RuntimeState, ctx: Context) -> CoreInfo | None:
    from ..format.config import load_memory_config

    config = load_memory_config(state_dir(stage.memory_root))
    master = tree.topic("core.md")
    views = stage.cache.build_views(
        tree,
        switches=stage.switches,
        master_text=master.text if master is not None else None,
        trusted_ids=index.trusted_ids(),
        creation_order=runtime.creation_order,
        recent_limit=config.recent_limit,
        counter=ctx.counter,
        budget=config.core_budget_tokens,
        link_for=index.link_for,
    )
    stage.write_views(views.files)
    if views.core is None:
        return None
    return CoreInfo(views.core.rendered_tokens, tuple(views.core.omitted_ids), views.core.budget)


def _write_runtime(stage: Stage, tree: TopicTree) -> RuntimeState:
    """Grow ``creation_order``; keep every byte when nothing changed (pitfall 1)."""
    rt = stage.layout.runtime_name
    path = stage.path / rt / "runtime.json"
    source = stage.root_file(f"{rt}/runtime.json")
    base, layout = (stage.path, Layout(stage.path)) if source == path else (stage.memory_root, stage.layout)

    def load() -> tuple[RuntimeState, tuple[Problem, ...]]:
        return load_runtime_state(base, layout)

    # the committed file is the one the stage's walk stamped (the walk under the lock proves it unchanged)
    stamp = stage.stamps.get(f"{rt}/runtime.json") if source != path else None
    state, problems = stage.switches.choose("runtime state", lambda: stage.cache.by_stamp("runtime.json", source, stamp,
                                                                                     load),
                                            lambda: stage.cache.by_bytes("runtime.json", source, load))
    if state.corrupt:  # rewriting it from defaults would lose creation_order and legacy cursors
        first = problems[0]
        raise MemoryError(
            CORRUPT_FILE,
            f"{first.message}; fix or remove it first (writing memory would replace it with defaults, "
            "losing its creation order and any legacy cursors)",
            path=first.path, line=first.line, column=first.column,
        )
    cache, baseline = stage.cache, stage.baseline

    def full() -> RuntimeState:
        # a cached topic's ids, without building its units
        ids = [mid for topic in sorted(tree.topics, key=lambda t: topic_sort_key(t.path)) for mid in topic.memory_ids]
        return state.with_creation_order(ids)

    def incremental() -> RuntimeState:
        if not cache.order_covers(baseline, state):
            return full()
        # every id of the baseline is in the order already, so only ids of the topics this
        # change made can be new, and they are numbered in the same (tree) order
        diff = differing(tree, baseline)
        made = diff[0] if diff is not None else [t for t in tree.topics if baseline.topic(t.path) is not t]
        return state.with_creation_order(
            u.memory_id for topic in sorted(made, key=lambda t: topic_sort_key(t.path)) for u in topic.units)

    grown = stage.switches.choose("creation order", incremental, full, lambda a, b: a == b and (a is state) == (b is state))
    cache.note_order_covers(tree, grown)
    if grown is not state or not source.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_runtime_json(grown), encoding="utf-8", newline="")
    return grown
