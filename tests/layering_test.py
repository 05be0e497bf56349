#!/usr/bin/env python3
"""Dependencies point one way (DESIGN.md principle 4): a module's library sources include, and its
CMake target links, only modules listed before it in the top-level CMakeLists.txt; and the module
map in docs/ARCHITECTURE.md names exactly the modules CMake builds.

  layering_test.py REPO_ROOT

Tests and benchmarks (*_test.cc, *_bench.cc, *_fuzz.cc) may use any module (their TEST_DEPS).
"""
import glob
import os
import re
import sys

ROOT = sys.argv[1]
FAILS = []


def fail(msg):
    FAILS.append(msg)
    print("FAIL " + msg)


top = open(os.path.join(ROOT, "CMakeLists.txt")).read()
order = re.search(r"foreach\(m ([^)]*)\)", top).group(1).split()
rank = {m: i for i, m in enumerate(order)}
present = [m for m in order if os.path.exists(os.path.join(ROOT, "src", m, "CMakeLists.txt"))]

# Includes of library sources.
n_includes = 0
for m in present:
    for f in sorted(glob.glob(os.path.join(ROOT, "src", m, "**", "*"), recursive=True)):
        if not f.endswith((".cc", ".h")) or re.search(r"_(test|bench|fuzz)\.cc$", f):
            continue
        for n, line in enumerate(open(f, errors="replace"), 1):
            inc = re.match(r'\s*#\s*include\s+"([a-z_0-9]+)/', line)
            if not inc or inc.group(1) not in rank:
                continue
            n_includes += 1
            if rank[inc.group(1)] > rank[m]:
                fail(f"{os.path.relpath(f, ROOT)}:{n}: module '{m}' includes '{inc.group(1)}', "
                     f"which is above it")

# Links: shoal_module(NAME DEPS shoal_x ...) and target_link_libraries(shoal_NAME ... shoal_x).
n_links = 0
for m in present:
    text = open(os.path.join(ROOT, "src", m, "CMakeLists.txt")).read()
    deps = []
    for call in re.finditer(r"shoal_module\(\s*" + m + r"\b(.*?)\)", text, re.S):
        body = re.split(r"\bTEST_DEPS\b", call.group(1))[0]
        deps += re.findall(r"\bshoal_([a-z_0-9]+)", body)
    for call in re.finditer(r"target_link_libraries\(\s*shoal_" + m + r"\b(.*?)\)", text, re.S):
        deps += re.findall(r"\bshoal_([a-z_0-9]+)", call.group(1))
    for d in deps:
        n_links += 1
        if d in rank and rank[d] >= rank[m]:
            fail(f"src/{m}/CMakeLists.txt: shoal_{m} links shoal_{d}, which is not below it")

# The module map of docs/ARCHITECTURE.md: one row per module CMake builds, no more.
doc = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
table = set(re.findall(r"^\| ([a-z_0-9]+) \| [^\n]*\|$", doc, re.M))
for m in present:
    if m not in table:
        fail(f"docs/ARCHITECTURE.md: the module map has no row for '{m}'")

print(f"{len(present)} modules in order {' < '.join(present)}; {n_includes} includes and "
      f"{n_links} link dependencies checked")
print(f"{len(FAILS)} failed" if FAILS else "every dependency points down")
sys.exit(1 if FAILS else 0)
