"""`provision dns migrate`: the resumable TTL-lowering cutover.

Pure core: `journal` (the record of one migration, as data and JSON), `marker` (the
``_provision-migration.<name>`` TXT RRset in the zone), `phases` (reconciling journal,
marker and record; what each command may do next; what the servers' answers mean),
`health` (the --health specs, parsed; the checks themselves are I/O). The shell is
`run`: journal files, provider calls, DNS queries, sleeps.
"""
