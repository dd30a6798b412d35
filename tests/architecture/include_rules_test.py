#!/usr/bin/env python3
"""Every #include of cmd/, lib/ and kernels/ against the rooms table of ARCHITECTURE.md.

The table says which room (a path prefix) may include which; ARCHITECTURE.md ("The rooms table") documents its
format. This test reads the table and its list of known exceptions, scans every quoted include (and every
angle-bracket include of a project path) of the .h, .cc, .cu and .cuh files under cmd/, lib/ and kernels/,
resolves it to a file of the repository (formats/X.pb.h is generated from formats/X.proto), and fails, naming
file:line, the include and the rule, on:
  - an include the table does not allow (and that is not a listed exception);
  - a file or an include target under no row of the table (an unknown room), or an include that names no file;
  - a listed exception that no longer occurs, or that the table now allows (so the list stays current);
  - a row naming a path that does not exist;
  - a cycle between rooms, in the table or in the includes.

Run from anywhere: python3 tests/architecture/include_rules_test.py (CTest: architecture.include_rules). The
synthetic-tree tests below feed the same checker small trees with one violation each and check it is caught.
Standard library only.
"""

import os
import re
import sys
import tempfile
import unittest

SCANNED_ROOTS = ("cmd", "lib", "kernels")
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
PROJECT_TOP = ("cmd/", "lib/", "kernels/", "formats/", "tests/")

TABLE_BEGIN, TABLE_END = "<!-- rooms-table:begin -->", "<!-- rooms-table:end -->"
EXCEPTIONS_BEGIN, EXCEPTIONS_END = "<!-- known-exceptions:begin -->", "<!-- known-exceptions:end -->"

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)')


class SpecError(Exception):
    """ARCHITECTURE.md itself is malformed."""


def _block(text, begin, end, what):
    """The text between two marker lines (a marker counts only on a line of its own), and the line number of the
    first marker."""
    start = re.search(r"^%s[ \t]*$" % re.escape(begin), text, re.M)
    stop = re.search(r"^%s[ \t]*$" % re.escape(end), text, re.M)
    if not start or not stop or stop.start() < start.end():
        raise SpecError("ARCHITECTURE.md: expected the %s between lines %s and %s" % (what, begin, end))
    return text[start.end():stop.start()], text[:start.start()].count("\n") + 1


def _cells(line):
    """The cells of a Markdown table row, or None for a line that is not a data row."""
    line = line.strip()
    if not line.startswith("|"):
        return None
    cells = [c.strip() for c in line.strip("|").split("|")]
    if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
        return None  # the separator row
    return cells


def _unquote(entry):
    return entry.strip().strip("`").strip()


def _entries(cell):
    return [_unquote(e) for e in cell.split(",") if _unquote(e)]


def parse_spec(text):
    """Returns (rules, exceptions): rules maps room -> {"allow": set, "deny": list, "line": n}; exceptions is a
    list of (file, include, line)."""
    rules = {}
    table, offset = _block(text, TABLE_BEGIN, TABLE_END, "rooms table")
    header_seen = False
    for n, line in enumerate(table.split("\n")):
        cells = _cells(line)
        if cells is None:
            continue
        if not header_seen:
            if [c.lower() for c in cells[:2]] != ["room", "may include"]:
                raise SpecError("ARCHITECTURE.md:%d: the rooms table's header must be | room | may include |, got %r"
                                % (offset + n, line.strip()))
            header_seen = True
            continue
        if len(cells) < 2:
            raise SpecError("ARCHITECTURE.md:%d: expected | room | may include |, got %r" % (offset + n, line))
        room = _unquote(cells[0])
        if not room or room in rules:
            raise SpecError("ARCHITECTURE.md:%d: %s room %r" % (offset + n, "repeated" if room else "empty", room))
        allow, deny = set(), []
        for entry in _entries(cells[1]):
            if entry.startswith("!"):
                deny.append(entry[1:].strip().strip("`"))
            else:
                allow.add(entry)
        rules[room] = {"allow": allow, "deny": deny, "line": offset + n}
    if not rules:
        raise SpecError("ARCHITECTURE.md: the rooms table has no rows")
    for room, rule in rules.items():
        for entry in rule["allow"]:
            if entry not in rules:
                raise SpecError("ARCHITECTURE.md:%d: room %s may include %s, which is no room of the table"
                                % (rule["line"], room, entry))

    exceptions = []
    block, offset = _block(text, EXCEPTIONS_BEGIN, EXCEPTIONS_END, "known exceptions")
    header_seen = False
    for n, line in enumerate(block.split("\n")):
        cells = _cells(line)
        if cells is None:
            continue
        if not header_seen:
            header_seen = True
            continue
        if len(cells) < 2 or not _unquote(cells[0]) or not _unquote(cells[1]):
            raise SpecError("ARCHITECTURE.md:%d: expected | file | include | ..., got %r" % (offset + n, line))
        exceptions.append((_unquote(cells[0]), _unquote(cells[1]), offset + n))
    return rules, exceptions


def room_of(path, rules):
    """The most specific room whose prefix the path starts with (a folder row ends in '/'; a row without one is a
    file or a file stem such as lib/generate/seq2seq_generator, which covers its .h and .cc)."""
    best = None
    for room in rules:
        if path.startswith(room) and (best is None or len(room) > len(best)):
            best = room
    return best


def scan_sources(root):
    """Yields (path relative to root, line number, include, quoted) for every project include."""
    for top in SCANNED_ROOTS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                full = os.path.join(folder, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                with open(full, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        if m.group(1) is not None:
                            yield rel, number, m.group(1), True
                        elif m.group(2).startswith(PROJECT_TOP):
                            yield rel, number, m.group(2), False


def source_files(root):
    for top in SCANNED_ROOTS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def resolves(root, include):
    if os.path.isfile(os.path.join(root, include)):
        return True
    m = re.fullmatch(r"(formats/.+)\.pb\.h", include)
    return bool(m) and os.path.isfile(os.path.join(root, m.group(1) + ".proto"))


def find_cycle(graph):
    """One cycle of a directed graph {node: set(nodes)} as a list of nodes, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


def check(root, spec_path=None):
    """All problems of the tree at root against its ARCHITECTURE.md, as a list of messages (empty: all good)."""
    spec_path = spec_path or os.path.join(root, "ARCHITECTURE.md")
    with open(spec_path, encoding="utf-8") as f:
        rules, exceptions = parse_spec(f.read())
    spec = os.path.relpath(spec_path, root)
    problems = []

    for room, rule in sorted(rules.items()):
        target = room.rstrip("/")
        stem_exists = any(os.path.isfile(os.path.join(root, room + s)) for s in SOURCE_SUFFIXES)
        if not (os.path.exists(os.path.join(root, target)) or stem_exists):
            problems.append("%s:%d: the room %s names no file or folder of the tree (remove or rename the row)"
                            % (spec, rule["line"], room))

    for path in sorted(source_files(root)):
        if room_of(path, rules) is None:
            problems.append("%s: unknown room: no row of the rooms table in %s covers this file" % (path, spec))

    listed = {(f, i): line for f, i, line in exceptions}
    used = set()
    actual = {}
    for path, number, include, quoted in scan_sources(root):
        where = "%s:%d: #include %s" % (path, number, ('"%s"' if quoted else "<%s>") % include)
        if not resolves(root, include):
            problems.append("%s: names no file of the tree (includes are written from the repository root, "
                            "like \"lib/core/errors.h\"; system and third-party headers take <...>)" % where)
            continue
        source_room, target_room = room_of(path, rules), room_of(include, rules)
        if source_room is None:
            continue  # reported above
        if target_room is None:
            problems.append("%s: unknown room: no row of the rooms table in %s covers %s" % (where, spec, include))
            continue
        rule = rules[source_room]
        denied = next((d for d in rule["deny"] if include.startswith(d)), None)
        allowed = denied is None and (target_room == source_room or target_room in rule["allow"])
        if (path, include) in listed:
            used.add((path, include))
            if allowed:
                problems.append("%s:%d: stale exception: the table now allows %s -> %s; remove it from the "
                                "known exceptions" % (spec, listed[(path, include)], path, include))
        elif not allowed:
            if denied is not None:
                why = "room %s may not include %s (row at %s:%d)" % (source_room, denied, spec, rule["line"])
            else:
                why = "room %s may include %s; %s is in room %s (row at %s:%d)" % (
                    source_room, ", ".join(sorted(rule["allow"])) or "only itself", include, target_room, spec,
                    rule["line"])
            problems.append("%s: not allowed: %s" % (where, why))
        if target_room != source_room and (allowed or (path, include) in listed):
            actual.setdefault(source_room, set()).add(target_room)  # a refused include is reported once, above

    for (path, include), line in sorted(listed.items(), key=lambda kv: kv[1]):
        if (path, include) not in used:
            problems.append("%s:%d: stale exception: %s no longer includes %s; remove it from the known exceptions"
                            % (spec, line, path, include))

    table_graph = {room: set(rule["allow"]) - {room} for room, rule in rules.items()}
    cycle = find_cycle(table_graph)
    if cycle:
        problems.append("%s: the rooms table has a cycle: %s" % (spec, " -> ".join(cycle)))
    cycle = find_cycle(actual)
    if cycle:
        problems.append("the includes form a cycle between rooms: %s" % " -> ".join(cycle))
    return problems


def repository_root():
    return os.environ.get("CABERT_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


class RepositoryIncludeRules(unittest.TestCase):
    def test_every_include_obeys_the_rooms_table(self):
        problems = check(repository_root())
        if problems:
            self.fail("%d problem(s) against ARCHITECTURE.md's rooms table:\n  %s"
                      % (len(problems), "\n  ".join(problems)))


SYNTHETIC_SPEC = """# rooms
<!-- rooms-table:begin -->
| room | may include |
|---|---|
| `lib/core/` | |
| `lib/models/` | `lib/core/`, `formats/` |
| `lib/train/` | `lib/core/`, `lib/models/` |
| `cmd/` | `lib/core/`, `lib/models/` |
| `cmd/pretrain.cc` | `cmd/`, `lib/core/`, `lib/train/` |
| `kernels/` | `lib/core/` |
| `kernels/attention_kernels.cc` | `kernels/`, `kernels/cpu/` |
| `kernels/cpu/` | `kernels/`, `!kernels/attention_kernels.h` |
| `formats/` | |
<!-- rooms-table:end -->
<!-- known-exceptions:begin -->
| file | include | why |
|---|---|---|
%s
<!-- known-exceptions:end -->
"""

SYNTHETIC_TREE = {
    "lib/core/errors.h": "#pragma once\n",
    "lib/models/encoder.h": '#include "lib/core/errors.h"\n#include "formats/model.pb.h"\n#include <vector>\n',
    "lib/train/loop.h": '#include "lib/models/encoder.h"\n',
    "cmd/commands.h": "#pragma once\n",
    "cmd/pretrain.cc": '#include "cmd/commands.h"\n#include "lib/train/loop.h"\n',
    "cmd/evaluate.cc": '#include "cmd/commands.h"\n#include "lib/models/encoder.h"\n',
    "kernels/attention_kernels.h": '#include "lib/core/errors.h"\n',
    "kernels/attention_kernels.cc": '#include "kernels/attention_kernels.h"\n#include "kernels/cpu/attention_cpu.h"\n',
    "kernels/philox.h": "#pragma once\n",
    "kernels/cpu/attention_cpu.h": '#include "kernels/philox.h"\n',
    "formats/model.proto": 'syntax = "proto3";\n',
}


class SyntheticTrees(unittest.TestCase):
    """The checker on small trees: clean, then each kind of violation once."""

    def problems(self, changes=None, exceptions="", spec=None):
        with tempfile.TemporaryDirectory() as root:
            files = dict(SYNTHETIC_TREE)
            files.update(changes or {})
            for path, text in files.items():
                if text is None:
                    continue
                full = os.path.join(root, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w") as f:
                    f.write(text)
            with open(os.path.join(root, "ARCHITECTURE.md"), "w") as f:
                f.write(spec if spec is not None else SYNTHETIC_SPEC % exceptions)
            return check(root)

    def assertCaught(self, problems, *needles):
        self.assertEqual(len(problems), 1, problems)
        for needle in needles:
            self.assertIn(needle, problems[0])

    def test_a_clean_tree_passes(self):
        self.assertEqual(self.problems(), [])

    def test_an_include_the_table_does_not_allow(self):
        problems = self.problems({"cmd/evaluate.cc": '#include "cmd/commands.h"\n\n#include "lib/train/loop.h"\n'})
        self.assertCaught(problems, 'cmd/evaluate.cc:3: #include "lib/train/loop.h"', "not allowed",
                          "room cmd/ may include", "lib/train/loop.h is in room lib/train/")

    def test_the_most_specific_row_wins(self):
        # cmd/pretrain.cc may include lib/train/ (its own row) but not lib/models/ (only cmd/'s row allows it).
        problems = self.problems({"cmd/pretrain.cc": '#include "lib/train/loop.h"\n#include "lib/models/encoder.h"\n'})
        self.assertCaught(problems, "cmd/pretrain.cc:2:", "room cmd/pretrain.cc may include")

    def test_a_denied_include_inside_an_allowed_room(self):
        problems = self.problems({"kernels/cpu/attention_cpu.h": '#include "kernels/attention_kernels.h"\n'})
        self.assertCaught(problems, "kernels/cpu/attention_cpu.h:1:", "may not include kernels/attention_kernels.h")

    def test_a_listed_exception_is_accepted(self):
        changes = {"kernels/cpu/attention_cpu.h": '#include "kernels/attention_kernels.h"\n'}
        exception = "| `kernels/cpu/attention_cpu.h` | `kernels/attention_kernels.h` | being moved |"
        self.assertEqual(self.problems(changes, exception), [])

    def test_a_stale_exception(self):
        exception = "| `kernels/cpu/attention_cpu.h` | `kernels/attention_kernels.h` | fixed since |"
        self.assertCaught(self.problems(exceptions=exception), "stale exception",
                          "kernels/cpu/attention_cpu.h no longer includes kernels/attention_kernels.h")

    def test_an_exception_the_table_allows_is_stale(self):
        exception = "| `cmd/evaluate.cc` | `lib/models/encoder.h` | allowed anyway |"
        self.assertCaught(self.problems(exceptions=exception), "stale exception", "the table now allows")

    def test_a_file_under_no_room(self):
        self.assertCaught(self.problems({"lib/plot/figure.h": "#pragma once\n"}), "lib/plot/figure.h: unknown room")

    def test_an_include_under_no_room(self):
        problems = self.problems({"lib/core/errors.h": '#include "tests/test_paths.h"\n',
                                  "tests/test_paths.h": "#pragma once\n"})
        self.assertCaught(problems, 'lib/core/errors.h:1: #include "tests/test_paths.h"', "unknown room")

    def test_an_include_that_names_no_file(self):
        problems = self.problems({"lib/train/loop.h": '#include "lib/models/encoder.h"\n#include "encoder.h"\n'})
        self.assertCaught(problems, 'lib/train/loop.h:2: #include "encoder.h"', "names no file")

    def test_a_project_header_in_angle_brackets_is_checked_too(self):
        problems = self.problems({"cmd/evaluate.cc": "#include <lib/train/loop.h>\n"})
        self.assertCaught(problems, "cmd/evaluate.cc:1: #include <lib/train/loop.h>", "not allowed")

    def test_a_generated_protobuf_header_needs_its_proto(self):
        problems = self.problems({"formats/model.proto": None, "formats/other.proto": 'syntax = "proto3";\n'})
        self.assertCaught(problems, 'lib/models/encoder.h:2: #include "formats/model.pb.h"', "names no file")

    def test_a_row_naming_no_path(self):
        spec = (SYNTHETIC_SPEC % "").replace("| `formats/` | |", "| `formats/` | |\n| `lib/gone/` | `lib/core/` |")
        self.assertCaught(self.problems(spec=spec), "the room lib/gone/ names no file or folder")

    def test_a_cycle_in_the_table(self):
        spec = (SYNTHETIC_SPEC % "").replace("| `lib/core/` | |", "| `lib/core/` | `lib/train/` |")
        self.assertCaught(self.problems(spec=spec), "the rooms table has a cycle", "lib/core/ -> lib/train/")

    def test_a_cycle_through_an_exception(self):
        changes = {"kernels/philox.h": '#include "kernels/cpu/attention_cpu.h"\n'}
        exception = "| `kernels/philox.h` | `kernels/cpu/attention_cpu.h` | a cycle |"
        self.assertCaught(self.problems(changes, exception), "the includes form a cycle between rooms",
                          "kernels/ -> kernels/cpu/ -> kernels/")

    def test_a_malformed_table_is_an_error_of_its_own(self):
        with self.assertRaises(SpecError):
            self.problems(spec=(SYNTHETIC_SPEC % "").replace("| `cmd/` | `lib/core/`", "| `cmd/` | `lib/nowhere/`"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
