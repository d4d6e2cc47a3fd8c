#!/usr/bin/env python3
"""The planned peak bytes (dsc-opt --dsc-plan-summary) must equal the bytes
the runtime allocated (dsc-run's arena line).

usage: check_memory.py SUMMARY.json DSC_RUN_LOG
"""
import json
import re
import sys

summary = json.load(open(sys.argv[1]))
planned = summary["bytes"]["device"]["peak"]
log = open(sys.argv[2]).read()
match = re.search(r"arena 0 \(device\): allocated (\d+) bytes .*planned peak (\d+) bytes", log)
if not match:
    print("no arena line in the dsc-run log")
    sys.exit(1)
allocated, runtime_planned = int(match.group(1)), int(match.group(2))
print(f"planned {planned} bytes, plan file says {runtime_planned}, allocated {allocated}")
sys.exit(0 if planned == allocated == runtime_planned else 1)
