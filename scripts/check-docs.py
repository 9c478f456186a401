#!/usr/bin/env python3
"""check-docs: re-runs the commands that README.md and docs/*.md show and checks that every output
line shown under one still comes out of it, so that no documented figure goes stale.

What runs: every `$ ` line of a fenced block whose program is `tessera`, a bench that times
nothing (planner_accuracy, fp8_gemms), a `for` loop, or a file tool (python3, printf, cat, grep,
head, sed, diff, ls, cp, mkdir), in the order the page shows them, in a scratch directory of the
page's own where the repository's files are linked (so `models/...` and `tests/data/...` resolve
and what a command writes stays there). A command goes on past a line ending in `\\` and past
lines that bash reads as unfinished (an open quote, a loop before its `done`); a line that only
sets shell variables (`QWEN="..."`) is kept for the page's later commands. Not run, and counted
as skipped: commands that measure or time this machine (tessera run, calibrate, validate,
compare, the timing benches: their figures are one run's), commands that read what those write
(named after `-o` or `-k`), and anything else (make, valgrind, mpirun).

A table row whose last cell is a command in backquotes (README's accuracy table) is checked as
that command showing one line with the row's percentages, in order. A shown line matches an
output line when both are equal after collapsing blanks; "..." (or "…")
inside a shown line stands for any text, a line "(stderr)" marks where stderr begins and is not
compared, and wall-clock figures ("in 0.034 s") are not compared. Exit status 1 when a shown line
is missing from its command's output or a command fails that shows no output.

--update writes each missing shown line's successor into the page: the output line that begins as
it did (its first 24 characters, blanks collapsed, or the words before its first figure), as the
command printed it; or, for a line with "..." or one whose figures come first (a table row), the
shown line with its figures (decimals, numbers of 3 digits or more) taken from the one output
line that matches it in everything else. What neither places is listed; read the diff before
committing.

Usage: scripts/check-docs.py [-v] [--update] [FILE.md ...]   (make check-docs; TESSERA_BIN names
the binary whose directory goes first on PATH, build/tessera by default)"""
import glob, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = {"tessera", "for", "python3", "printf", "cat", "grep", "head", "sed", "diff", "ls", "cp",
       "mkdir", "build/bench/planner_accuracy", "build/bench/fp8_gemms",
       "build/bench/gemm_transfer"}  # the benches that time nothing
MEASURED = re.compile(r"\btessera (run|calibrate|validate|compare)\b")
WALL = re.compile(r"\bin \d+(?:\.\d+)? s\b")
ASSIGNMENT = re.compile(r"\w+=(?:\"[^\"]*\"|'[^']*'|\S*)\s*")
ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)\s*")


def unfinished(parts):
    """Whether the command's lines so far need more: a trailing backslash, or what bash reads as
    unfinished (an open quote, a loop before its `done`)."""
    if parts[-1].endswith("\\"):
        return True
    p = subprocess.run(["bash", "-n", "-c", "\n".join(parts)], capture_output=True, text=True)
    return "unexpected end of file" in p.stderr or "unexpected EOF" in p.stderr


def commands(path):
    """(line number, command, shown output lines) of every `$ ` line inside a fenced block and of
    every table row that cites its command (table_row)."""
    found, fence, cur = [], False, None
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.lstrip().startswith("```"):
            if cur:
                found.append(cur)
            fence, cur = not fence, None
        elif fence and ln.startswith("$ "):
            if cur:
                found.append(cur)
            start, parts = i + 1, [ln[2:]]
            while unfinished(parts) and i + 1 < len(lines) and not lines[i + 1].startswith("```"):
                i += 1
                parts.append(lines[i])
            cur = (start, "\n".join(parts), [])
        elif fence and cur:
            cur[2].append(ln)
        elif not fence:
            row = table_row(ln)
            if row:
                found.append((i + 1,) + row)
        i += 1
    return found


def table_row(line):
    """A table row whose last cell is the command that made it (`| ... | 3.8% | `cmd` |`): the
    command, and one output line that must hold the row's percentages, in order."""
    m = re.fullmatch(r"\|(.*)\| `((?:tessera|build/|bash) [^`]*|build/[^` ]*)` \|", line.strip())
    if not m:
        return None
    figures = re.findall(r"[-+−]?\d+(?:\.\d+)?%", m.group(1))
    return (m.group(2), ["... " + " ... ".join(f.replace("−", "-") for f in figures) + " ..."]) \
        if figures else None


def canon(s):
    return WALL.sub("in # s", " ".join(s.split()))


def shown_lines(shown):
    return [x for x in shown if x.strip() and x.strip() not in ("...", "…", "(stderr)")]


def match_index(want, got, used):
    """The first of the canonical output lines `got` not in `used` (indices) that the shown line
    `want` matches, or None: two shown lines alike need two such output lines."""
    pieces = [re.escape(p) for p in ELLIPSIS.split(canon(want))]
    rx = re.compile(r"(?:\s*.*?\s*)".join(pieces) + ("" if pieces[-1] else ".*"))
    return next((k for k, g in enumerate(got) if k not in used and rx.fullmatch(g)), None)


def written(cmd):
    """The files a command names after -o or -k (what a skipped command would have written)."""
    return set(re.findall(r"(?:^|\s)(?:-o|-k|--out)\s+(\S+)", cmd))


def skip_reason(cmd, unwritten):
    m = MEASURED.search(cmd)
    if m:
        return f"measures this machine (tessera {m.group(1)})"
    words = cmd.split()
    while len(words) > 1 and re.fullmatch(r"\w+=\S*", words[0]):
        words = words[1:]  # VAR=value before the program
    if len(words) > 1 and words[0] == "time":
        words = words[1:]  # the shell's timer: its lines go to stderr, unshown; the output is checked
    program = words[0].removeprefix("./")
    if program.startswith("build/bench/") and program not in RUN or "/usr/bin/time" in cmd:
        return "times this machine"
    if program not in RUN:
        return f"not a command this check runs ({program})"
    for f in unwritten:
        if f in cmd.split():
            return f"reads {f}, which a skipped command writes"
    return None


NUMBER = re.compile(r"(?<![\w.=])[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?(?![\w.])")


def is_figure(tok):
    """A number a command's output may change: a decimal or a figure of 3 digits or more; small
    integers (a rank, a TP degree) stay as they are and keep the line's identity."""
    return "." in tok or len(re.sub(r"\D", "", tok)) >= 3


def renumber(shown, out, used):
    """The shown line with its figures taken from the output line that matches it everywhere else
    (same words, small integers and elisions; each figure right-aligned in its old width where
    blanks allow), or None. An output line already taken (`used`, indices) is not taken again."""
    parts, pos, figures = [], 0, []
    text = shown.strip()
    for m in NUMBER.finditer(text):
        if not is_figure(m.group(0)):
            continue
        parts.append(text[pos:m.start()])
        figures.append(m)
        pos = m.end()
    if not figures:
        return None
    parts.append(text[pos:])

    def literal(piece):
        rx = r".*?".join(r"\s+".join(re.escape(w) for w in c.split()) for c in ELLIPSIS.split(piece))
        return (r"\s*" if piece[:1].isspace() else "") + rx + (r"\s*" if piece[-1:].isspace() else "")
    rx = re.compile(r"\s*" + r"([-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?)".join(literal(p) for p in parts) + r"\s*")
    for k, raw in enumerate(out):
        if k in used:
            continue
        m = rx.fullmatch(raw)
        if not m:
            continue
        used.add(k)
        line = shown
        lead = len(shown) - len(shown.lstrip())
        for f, new in sorted(zip(figures, m.groups()), key=lambda x: -x[0].start()):
            a, b = f.start() + lead, f.end() + lead
            width = b - a
            while len(new) > width and a > 0 and line[a - 1] == " " and a - 2 >= 0 and line[a - 2] == " ":
                a, width = a - 1, width + 1
            line = line[:a] + (new.rjust(width) if line[a - 1:a] == " " else new) + line[b:]
        return line
    return None


def successors(missing, out, block, lines, fixes, used):
    """--update: for each missing shown line of a fenced block (file lines `block`, a range), the
    shown line with its figures renewed from the output line that matches it everywhere else
    (renumber), or else the one output line not taken already that begins as it did (a line whose
    words changed); appends (index, new line) to fixes and returns the shown lines it could not
    place. Several lines beginning alike (table rows whose names share a prefix) place none.
    `used`: the output lines the block's other shown lines matched, never taken again."""
    left = []
    for m in missing:
        at = next((i for i in block if lines[i] == m and all(i != f[0] for f in fixes)), None)
        if at is None:
            left.append(m)
            continue
        new = renumber(m, out, used)
        if new is not None:
            fixes.append((at, new))
            continue
        near = [k for k, raw in enumerate(out) if k not in used and canon(raw)[:24] == canon(m)[:24]]
        lead = re.match(r"\D{4,}", canon(m))  # a figure inside the first 24: the words before it
        if not near and lead:
            near = [k for k, raw in enumerate(out) if k not in used and canon(raw).startswith(lead.group(0))]
        if len(near) == 1 and not ELLIPSIS.search(m.strip()):
            used.add(near[0])
            indent = m[:len(m) - len(m.lstrip())] if not out[near[0]].startswith(" ") else ""
            fixes.append((at, indent + out[near[0]].rstrip()))
            continue
        left.append(m)
    return left


def check_file(path, env, verbose, counts, update=False):
    rel = os.path.relpath(path, ROOT)
    lines, fixes = open(path, encoding="utf-8").read().split("\n"), []
    with tempfile.TemporaryDirectory(prefix="check-docs-") as work:
        for e in os.listdir(ROOT):
            if not e.startswith("."):
                os.symlink(os.path.join(ROOT, e), os.path.join(work, e))
        unwritten, prelude = set(), ""
        for line, cmd, shown in commands(path):
            head = f"{rel}:{line}: {cmd.splitlines()[0][:100]}"
            if ASSIGNMENT.fullmatch(cmd):
                prelude += cmd + "\n"  # a shell variable the file's later commands use
                continue
            why = skip_reason(cmd, unwritten)
            if why:
                unwritten |= written(cmd)
                counts["skipped"] += 1
                if verbose:
                    print(f"{head}\n    skipped: {why}")
                continue
            p = subprocess.run(["bash", "-c", prelude + cmd], cwd=work, env=env, capture_output=True,
                               text=True, timeout=600)
            out = p.stdout + p.stderr
            got = [canon(x) for x in out.split("\n")]
            want, used, missing = shown_lines(shown), set(), []
            for w in want:
                k = match_index(w, got, used)
                if k is None:
                    missing.append(w)
                else:
                    used.add(k)
            if missing and update and len(shown) and not cmd.startswith("|"):
                first = line - 1 + len(cmd.split("\n"))
                end = next((i for i in range(first, len(lines)) if lines[i].lstrip().startswith("```")), len(lines))
                block = range(first, end) if lines[line - 1].startswith("$ ") else range(0)
                missing = successors(missing, out.split("\n"), block, lines, fixes, used)
            if missing or (p.returncode != 0 and not want):
                counts["differ"] += 1
                print(f"{head}\n    exit {p.returncode}; {len(missing)} of {len(want)} shown "
                      "line(s) not in its output:")
                for m in missing[:4]:
                    print(f"    shown: {m.strip()[:160]}")
                    near = [g for g in got if g[:24] == canon(m)[:24]]
                    if near:
                        print(f"    now:   {near[0][:160]}")
                if not want:
                    print(f"    {(out.strip().splitlines() or [''])[-1][:160]}")
            else:
                counts["match"] += 1
    if fixes:
        for i, new in fixes:
            lines[i] = new
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"{rel}: {len(fixes)} line(s) updated")


def main(argv):
    verbose, update = "-v" in argv, "--update" in argv
    files = [os.path.abspath(a) for a in argv if a not in ("-v", "--update")] or \
        [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    tessera = os.path.abspath(os.environ.get("TESSERA_BIN") or os.path.join(ROOT, "build", "tessera"))
    if not os.access(tessera, os.X_OK):
        sys.exit(f"check-docs: {tessera} is not built (make all)")
    env = dict(os.environ, TESSERA_DATA=ROOT,
               PATH=os.path.dirname(tessera) + os.pathsep + os.environ.get("PATH", ""))
    counts = {"match": 0, "differ": 0, "skipped": 0}
    for f in files:
        check_file(f, env, verbose, counts, update)
    print(f"check-docs: {sum(counts.values())} commands: {counts['match']} match, "
          f"{counts['differ']} differ, {counts['skipped']} skipped")
    return 1 if counts["differ"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
