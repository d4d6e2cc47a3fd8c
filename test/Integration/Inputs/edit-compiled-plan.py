"""Makes one hand edit of a compiled pipelined module (dsc-opt --dsc-compile
with pp=2), as a user might, for the tests that every path into execution
refuses it: the edited module is written to stdout.

usage: edit-compiled-plan.py EDIT MODULE

EDIT is one of
  swap-sends         the first two sends of @step.stage0 trade places
  drop-recv          the last receive of @step.stage0 is deleted
  change-microbatch  the first send of @step.stage0 names the next micro-batch
  reorder-collectives  in @optimizer.stage0 the all-reduce over ["pp"] (the
                     tied embedding's gradient) and the clip_grad_norm (the
                     global norm over the stages) trade places
  message-shape      the first send of @step.stage0 moves a tensor whose last
                     dim is twice as large

Exits 1 naming the edit when the module has no place to make it, so a change
of the compiler's output cannot turn the tests into no-ops.
"""
import re
import sys


def body(lines, name):
    """The indices of the lines of func.func @name's body."""
    start = next((i for i, line in enumerate(lines)
                  if line.lstrip().startswith("func.func @%s(" % name)), None)
    if start is None:
        sys.exit("edit-compiled-plan.py: no func.func @%s" % name)
    end = start + 1
    while lines[end].strip() != "}":
        end += 1
    return list(range(start + 1, end))


def find(lines, indices, needle, edit):
    found = [i for i in indices if needle in lines[i]]
    if not found:
        sys.exit("edit-compiled-plan.py: %s: no '%s' to edit" % (edit, needle))
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    edit, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        lines = f.read().split("\n")
    step = body(lines, "step.stage0")
    if edit == "swap-sends":
        a, b = find(lines, step, "dsc.pipeline_send", edit)[:2]
        lines[a], lines[b] = lines[b], lines[a]
    elif edit == "drop-recv":
        del lines[find(lines, step, "dsc.pipeline_recv", edit)[-1]]
    elif edit == "change-microbatch":
        a = find(lines, step, "dsc.pipeline_send", edit)[0]
        lines[a] = re.sub(r"microbatch = (\d+)",
                          lambda m: "microbatch = %d" % (int(m.group(1)) + 1),
                          lines[a])
    elif edit == "reorder-collectives":
        optimizer = body(lines, "optimizer.stage0")
        a = find(lines, optimizer, 'axes = ["pp"]', edit)[0]
        b = find(lines, optimizer, "dsc.clip_grad_norm", edit)[0]
        lines[a], lines[b] = lines[b], lines[a]
    elif edit == "message-shape":
        a = find(lines, step, "dsc.pipeline_send", edit)[0]
        lines[a] = re.sub(r"x(\d+)x(f32|bf16|f16)>$",
                          lambda m: "x%dx%s>" % (2 * int(m.group(1)),
                                                 m.group(2)),
                          lines[a])
    else:
        sys.exit("edit-compiled-plan.py: unknown edit '%s'\n%s" % (edit,
                                                                   __doc__))
    sys.stdout.write("\n".join(lines))


if __name__ == "__main__":
    main()
