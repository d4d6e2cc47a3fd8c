#!/usr/bin/env python3
"""Feeds dsc-translate --import-neox deterministic mutations of valid configs
(truncations, byte flips, deleted and duplicated lines, odd values) and fails
if any run crashes, hangs or exits with anything but 0 or 1, or exits 1
without an error message. A config is untrusted input.

usage: mutate_configs.py TOOL CONFIG... [--count N] [--argv TEMPLATE]

TEMPLATE is the command run on each mutant, split on spaces, with {tool}
and {config} replaced (default: dsc-translate's import,
"{tool} --import-neox {config} -o /dev/null"); e.g. dsc-run reading the
training keys: "{tool} {config} --vocab-size 256 --print-config".
"""
import random
import subprocess
import sys
import tempfile


def mutations(text, rng):
    lines = text.splitlines(keepends=True)
    yield text[: rng.randrange(len(text) + 1)]
    pos = rng.randrange(len(text))
    yield text[:pos] + chr(rng.choice(b"{}[]:,\"'#-\n\t 0x\x00\xff")) + text[pos + 1:]
    if lines:
        i = rng.randrange(len(lines))
        yield "".join(lines[:i] + lines[i + 1:])
        yield "".join(lines[:i] + [lines[i]] + lines[i:])
    odd = rng.choice(["-1", "0", "1e400", "nan", "[]", "{}", "\"\"", "99999999999999999999", "true", "~"])
    yield "".join(l if ":" not in l or rng.random() < 0.7 else l.split(":")[0] + ": " + odd + "\n" for l in lines)


def main():
    args = sys.argv[1:]
    count = 60
    if "--count" in args:
        i = args.index("--count")
        count = int(args[i + 1])
        del args[i:i + 2]
    template = "{tool} --import-neox {config} -o /dev/null"
    if "--argv" in args:
        i = args.index("--argv")
        template = args[i + 1]
        del args[i:i + 2]
    tool, configs = args[0], args[1:]
    rng = random.Random(20261130)
    runs = bad = 0
    for config in configs:
        text = open(config, encoding="utf-8").read()
        for _ in range(count):
            for mutant in mutations(text, rng):
                with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False,
                                                 encoding="utf-8", errors="replace") as f:
                    f.write(mutant)
                try:
                    argv = [word.replace("{tool}", tool).replace("{config}", f.name)
                            for word in template.split()]
                    proc = subprocess.run(argv, capture_output=True, text=True,
                                          timeout=20)
                except subprocess.TimeoutExpired:
                    print(f"HANG on {f.name}")
                    bad += 1
                    continue
                runs += 1
                if proc.returncode not in (0, 1) or (proc.returncode == 1 and "error" not in proc.stderr):
                    print(f"exit {proc.returncode} on {f.name}:\n{mutant}\n{proc.stderr[-2000:]}")
                    bad += 1
    print(f"{runs} mutated configs, {bad} bad")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
