"""Topic files on disk: the one place that decides what a file under ``topics/`` reads as
(outside links refused, unreadable and non-UTF-8 files named as problems)."""

from __future__ import annotations

from pathlib import Path

from .model import INVALID_TOPIC_FORMAT
from ..errors import Problem


def _decode(rel: str, data: bytes) -> tuple[str | None, Problem | None]:
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, Problem(INVALID_TOPIC_FORMAT, "topic file is not valid UTF-8", "topics/" + rel, line, column)


def outside_link_problem(topics_dir: Path, rel: str) -> Problem | None:
    """A topic file that is a symbolic link leading outside ``topics/`` is never read: its
    content is not memory, and showing it could leak any file on the machine."""
    file = topics_dir / rel
    if not file.is_symlink():
        return None
    try:
        file.resolve(strict=True).relative_to(topics_dir.resolve(strict=True))
        return None
    except (OSError, RuntimeError, ValueError):
        return Problem(
            "PATH_OUTSIDE_WORKSPACE", "symbolic link leads outside the workspace; not read", "topics/" + rel, None, None
        )


def read_topic_file(topics_dir: Path, rel: str) -> tuple[str | None, bytes | None, Problem | None]:
    """One topic file as (text, raw bytes, problem): the single place that decides what a
    topic file on disk reads as (outside links refused, unreadable and non-UTF-8 named)."""
    outside = outside_link_problem(topics_dir, rel)
    if outside is not None:
        return None, None, outside
    try:
        data = (topics_dir / rel).read_bytes()
    except OSError as exc:
        return None, None, Problem(INVALID_TOPIC_FORMAT, f"cannot read topic file: {exc.strerror}", "topics/" + rel, 1, 1)
    text, problem = _decode(rel, data)
    return text, data, problem


def read_topic_texts(topics_dir: Path) -> tuple[dict[str, str], list[Problem]]:
    """Every ``*.md`` under ``topics_dir`` (recursive), decoded; undecodable files are Problems."""
    texts: dict[str, str] = {}
    problems: list[Problem] = []
    if not topics_dir.is_dir():
        return texts, problems
    try:
        files = sorted(topics_dir.rglob("*.md"))
    except OSError as exc:
        problems.append(Problem(INVALID_TOPIC_FORMAT, f"cannot list topic files: {exc.strerror or exc}", "topics", None, None))
        return texts, problems
    for file in files:
        if not file.is_file():
            continue
        rel = file.relative_to(topics_dir).as_posix()
        text, _data, problem = read_topic_file(topics_dir, rel)
        if problem is not None:
            problems.append(problem)
        else:
            texts[rel] = text  # type: ignore[assignment]
    return texts, problems
