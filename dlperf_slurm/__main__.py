from dlperf_slurm.cli import main

raise SystemExit(main())
