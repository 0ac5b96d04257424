#!/bin/bash
# Interleaved A/B of run.py's own rows: tree A (e.g. `git archive ea12e94`) against tree B, each
# running its own run.py on its own copies of the states and its own user cache, two rounds.
#   AB_A=DIR AB_B=DIR AB_OUT=DIR [ROWS=a,b] [SCALES=1,4] [PY=python] benchmarks/ab_runpy.sh
# AB_OUT/st-A and AB_OUT/st-B hold the state copies (scale-N, as run.py names them; copy one
# state into both so the two sides measure the same workspace). Compare with
#   python benchmarks/ab_runpy_compare.py AB_OUT
set -u
ROWS=${ROWS:-parse_cached,revision,pending_warm,why_session_fresh,edit_noop_fresh,edit_reword_fresh,apply_update_fresh,app_first_paint,app_reload_one_file}
SCALES=${SCALES:-1,4}
PY=${PY:-python}
for round in 1 2; do
  for side in A B; do
    tree_var="AB_$side"; tree=${!tree_var}
    env -u PYTHONDONTWRITEBYTECODE PYTHONPATH="$tree" MEMORY_TUI_CACHE_DIR="$AB_OUT/cache-run-$side" \
      "$PY" "$tree/benchmarks/run.py" --scale "$SCALES" --runs 3 --rows "$ROWS" \
      --states "$AB_OUT/st-$side" --json > "$AB_OUT/out-$side-$round.json" 2> "$AB_OUT/err-$side-$round.txt"
    echo "$side round $round rc=$? $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
