from eagle3_forensics.cli.main import main

raise SystemExit(main())
