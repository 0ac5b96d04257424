"""Refresh ``tests/durations.json``, the order pytest-xdist's workers run the slow tests in
(``conftest.pytest_collection_modifyitems``: longest first).

    python -m pytest -q -p no:cacheprovider -n auto --dist loadgroup --junitxml=/tmp/run.xml
    python tests/durations.py /tmp/run.xml

Take a quiet run: the figures only rank the tests, but a busy machine ranks by who waited
longest. Tests under ``--min`` seconds (default 1.0) are left out and keep their collection
order after the listed ones; a test the file does not name (a new one) is simply not
moved forward. A stale entry (a renamed test) is never matched and does no harm."""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent


def nodeid(case: ET.Element) -> str:
    """junit's ``classname`` (``tests.unit.test_x`` or ``tests.unit.test_x.TestCls``) and
    ``name`` back into pytest's node id."""
    parts = case.get("classname", "").split(".")
    name = case.get("name", "")
    for cut in range(len(parts), 0, -1):
        module = Path(HERE.parent, *parts[:cut]).with_suffix(".py")
        if module.is_file():
            return "::".join([Path(*parts[:cut]).as_posix() + ".py", *parts[cut:], name])
    return "::".join([*parts, name])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit", nargs="+", type=Path)
    ap.add_argument("--min", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=HERE / "durations.json")
    args = ap.parse_args()
    seconds: dict[str, float] = {}
    for path in args.junit:
        for case in ET.parse(path).getroot().iter("testcase"):
            secs = float(case.get("time") or 0.0)
            if secs >= args.min:
                nid = nodeid(case)
                seconds[nid] = round(max(secs, seconds.get(nid, 0.0)), 1)
    body = {"about": ("seconds per test, only their ranking matters (conftest.py runs them longest first under "
                      "xdist); tests/durations.py writes it from the junit XML of a quiet run"),
            "seconds": dict(sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0])))}
    args.out.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    print(f"{len(seconds)} tests of {args.min} s or more -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
