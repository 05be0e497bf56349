#!/usr/bin/env python3
"""The code stays readable in small pieces (DESIGN.md "Habits"): no C++ source file (.cc, .h)
under src/, tests/ or tools/ is longer than 600 lines (generated tables excepted) and no function
is longer than 120 lines.

  code_shape_test.py REPO_ROOT [--list N]

A function is a brace block opened at namespace or class scope whose header (template clauses,
attributes and access specifiers aside) ends like a function: a closing parenthesis, possibly
followed by qualifiers, a trailing return type or a constructor's initializer list, or a lambda
assigned to a variable. Its length runs from the line of its opening brace to the line of its
closing brace, both included (a signature wrapped over several lines does not count). Braces of
initializers inside a header (`Opts o = Opts{}`, `: v_{1, 2}`) are part of the header. Lambdas
and local classes count toward the function around them. Comments, string and character
literals (raw strings included) and preprocessor lines are blanked before braces are counted;
both branches of an #if are measured. Cross-checked against universal-ctags' function extents
(same end lines for every function of the tree).
--list N prints the N longest functions instead of failing.
"""
import glob
import os
import re
import sys

MAX_FILE_LINES = 600  # a file a reader holds in mind at once (the bound)
MAX_FUNCTION_LINES = 120  # two screens; longer bodies hide their steps
GENERATED = {"src/tokenizer/unicode_tables.cc"}  # Unicode property tables written by a script

SCOPE_WORDS = re.compile(r"(class|struct|union|enum)\b")
# A header that ends like a function: `)`, qualifiers, perhaps a trailing return type.
FUNCTION_END = re.compile(r"\)\s*(const|override|final|noexcept|mutable|&|&&|\s)*"
                          r"(->\s*[\w:<>,\s*&]+)?\s*$")
INIT_LIST = re.compile(r"\)\s*:\s*\w")  # a constructor's member initializer list
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*(\(|$)")


def ident_before(text, i):
    """The identifier characters just before text[i] (a raw string's encoding prefix, say)."""
    j = i
    while j and (text[j - 1].isalnum() or text[j - 1] == "_"):
        j -= 1
    return text[j:i]


def strip_code(text):
    """Returns text with comments and literals blanked, newlines kept (line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and re.fullmatch(r"(u8|u|U|L)?", ident_before(text, i)):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            if c == "'" and i and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_template(h):
    """h without its leading access specifiers, template<...> clauses and [[attributes]]."""
    while True:
        h = re.sub(r"^(\[\[.*?\]\]|(public|protected|private)\s*:(?!:))\s*", "", h)
        if not re.match(r"template\s*<", h):
            return h
        depth, j = 0, h.index("<")
        for j in range(j, len(h)):
            depth += {"<": 1, ">": -1}.get(h[j], 0)
            if depth == 0:
                break
        h = h[j + 1:].lstrip()


def classify(h):
    """(kind, name) of a brace opened at namespace or class scope after the header h."""
    if h.count("(") > h.count(")") or (INIT_LIST.search(h) and re.search(r"[\w>]$", h)):
        return "init", ""  # a brace initializer in a parameter list or a constructor's init list
    h2 = strip_template(h)
    if re.match(r"(inline\s+)?namespace\b", h2) or re.fullmatch(r'(extern\s*"")?', h2):
        return "scope", ""
    if FUNCTION_END.search(h2) or INIT_LIST.search(h2):
        if CONTROL.search(h2.split("(")[0].strip() + "("):
            return "block", ""
        m = re.match(r"(?:const\s+)?(?:auto|[\w:<>]+)\s+(\w+)\s*=\s*\[", h2)  # a lambda
        if m:
            return "function", m.group(1)
        m = re.search(r"([\w:~]*operator\s*(?:\(\)|[^\s(]+)|[\w:~]+)\s*\(", h2)
        return "function", m.group(1) if m else "?"
    if SCOPE_WORDS.match(h2) or re.match(r"(typedef|static|const)\s+(struct|union|enum)\b", h2):
        return "scope", ""
    return "block", ""


def functions(path):
    """Yields (name, first_line, line_count) for each function body at namespace/class scope."""
    code = strip_code(open(path, errors="replace").read())
    # Preprocessor lines, continuations included, blanked with their newlines kept (a `\s*` here
    # would swallow the blank lines before a directive and shift every line number after it).
    code = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: "\n" * m.group(0).count("\n"), code,
                  flags=re.M)
    stack = []  # per open brace: (kind, start_line, name)
    header_start = 0
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c not in ";{}":
            continue
        elif any(k == "init" for k, _, _ in stack):
            # Inside a brace initializer of a header: its braces nest, the header goes on.
            if c == "{":
                stack.append(("init", line, ""))
            elif c == "}":
                stack.pop()
        elif c == "{":
            kind, name = "block", ""
            if all(k == "scope" for k, _, _ in stack):
                kind, name = classify(" ".join(code[header_start:i].split()))
            stack.append((kind, line, name))
            if kind != "init":
                header_start = i + 1
        else:
            if c == "}" and stack:
                kind, start, name = stack.pop()
                if kind == "function":
                    yield name, start, line - start + 1
            header_start = i + 1

def main():
    root = sys.argv[1]
    list_n = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--list" else 0
    files = sorted(
        f for d in ("src", "tests", "tools") for ext in ("cc", "h")
        for f in glob.glob(os.path.join(root, d, "**", "*." + ext), recursive=True))
    fails = []
    found = []
    n_functions = 0
    for f in files:
        rel = os.path.relpath(f, root)
        lines = open(f, errors="replace").read().count("\n")
        if lines > MAX_FILE_LINES and rel not in GENERATED:
            fails.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES})")
        for name, start, count in functions(f):
            n_functions += 1
            found.append((count, f"{rel}:{start} {name}"))
            if count > MAX_FUNCTION_LINES:
                fails.append(f"{rel}:{start}: function {name} is {count} lines "
                             f"(at most {MAX_FUNCTION_LINES})")
    if list_n:
        for count, where in sorted(found, reverse=True)[:list_n]:
            print(f"{count:5d} {where}")
        return 0
    for msg in fails:
        print("FAIL " + msg)
    print(f"{len(files)} files, {n_functions} functions checked; {len(fails)} over the bounds")
    return 1 if fails or n_functions < 500 else 0


if __name__ == "__main__":
    sys.exit(main())
