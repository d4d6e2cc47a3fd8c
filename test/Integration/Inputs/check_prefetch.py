"""Checks --dsc-plan-memory's prefetch reservation on a printed plan.

Usage: check_prefetch.py PLAN_TEXT PROGRAM

For every GatherParameter of PROGRAM after the first, no instruction between
the gather before it and itself may touch the bytes of its output, so the
runtime can launch it right after that gather. Prints how many gathers are
free to go ahead ("free N of M") and the first one held back, if any; the
exit status is 0 either way (FileCheck judges the line).
"""
import re
import sys

BUFFER = re.compile(r"^%(\d+) '[^']*': \S+ \S+ \[[^\]]*\] at arena (\d+) "
                    r"\[(\d+), (\d+)\)")
INSTRUCTION = re.compile(r"^\s+(\d+) (\w+) '[^']*' in\(([^)]*)\)"
                         r"(?: out\(([^)]*)\))?")


def ids(field):
    return [int(m) for m in re.findall(r"%(\d+)", field or "")]


def main():
    text, program = open(sys.argv[1]).read().splitlines(), sys.argv[2]
    spans = {}
    for line in text:
        m = BUFFER.match(line)
        if m:
            spans[int(m.group(1))] = (int(m.group(2)), int(m.group(3)),
                                      int(m.group(4)))
    body, inside = [], False
    for line in text:
        if line.startswith("program "):
            inside = line.startswith("program '%s'" % program)
            continue
        m = INSTRUCTION.match(line) if inside else None
        if m:
            body.append((m.group(2), ids(m.group(3)) + ids(m.group(4)),
                         ids(m.group(4))))

    def overlap(a, b):
        (ra, ba, ea), (rb, bb, eb) = spans[a], spans[b]
        return ra == rb and ba < eb and bb < ea

    gathers = [i for i, (op, _, _) in enumerate(body)
               if op == "GatherParameter"]
    free, held = 0, None
    for previous, current in zip(gathers, gathers[1:]):
        out = body[current][2][0]
        touched = [b for i in range(previous + 1, current)
                   for b in body[i][1]]
        if any(overlap(out, b) for b in touched if b != out):
            held = held or current
        else:
            free += 1
    print("free %d of %d" % (free, len(gathers) - 1))
    if held is not None:
        print("held back: instruction %d" % held)


main()
