from memory_tui.cli import main

raise SystemExit(main())
