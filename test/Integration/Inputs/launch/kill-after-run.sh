#!/bin/sh
# Runs its arguments (dsc-run ...), then SIGKILLs itself on the world rank
# and attempt that KILL_AFTER_RUN=RANK:ATTEMPT names (the attempt is
# TORCHELASTIC_RESTART_COUNT, 0 for the first) if the run succeeded: a rank
# that dies after the job's final save, a window too narrow for a signal
# sent from outside to hit every time.
"$@"
rc=$?
if [ "$rc" -eq 0 ] &&
   [ "${OMPI_COMM_WORLD_RANK:-0}:${TORCHELASTIC_RESTART_COUNT:-0}" = "$KILL_AFTER_RUN" ]; then
  kill -KILL $$
fi
exit "$rc"
