#!/usr/bin/env python3
"""Lists the non-test functions in src/ longer than a limit (default 120 lines), longest first, to find
decision code past a screen (STYLE.md asks for about 100 lines). Test files (tests.rs, *_tests.rs, tests/
folders) and #[cfg(test)] modules are skipped. A rough reader: it counts braces, with strings and line
comments stripped. Usage: python3 scripts/long-functions.py [LIMIT] [DIR]"""
import os, re, sys

limit = int(sys.argv[1]) if len(sys.argv) > 1 else 120
root = sys.argv[2] if len(sys.argv) > 2 else "src"
fn_re = re.compile(r'^\s*(pub(\([a-z]+\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+([A-Za-z0-9_]+)')

def strip(line):
    # drop line comments and string contents well enough for brace counting
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split('//')[0]

out = []
for d, _, files in os.walk(root):
    for f in files:
        if not f.endswith('.rs'):
            continue
        path = os.path.join(d, f)
        stem = f[:-3]
        if stem == 'tests' or stem.endswith('_tests') or '/tests/' in path:
            continue
        lines = open(path, encoding='utf-8').read().split('\n')
        i = 0
        cfg_test = False
        while i < len(lines):
            t = lines[i].strip()
            if cfg_test and re.match(r'(pub(\(crate\))?\s+)?mod\s+\w+\s*\{', t):
                break
            if t.startswith('#[cfg(test)]'):
                cfg_test = True
                i += 1
                continue
            m = fn_re.match(lines[i])
            if m and not t.endswith(';'):
                name = m.group(6)
                depth = 0
                started = False
                j = i
                while j < len(lines):
                    s = strip(lines[j])
                    depth += s.count('{') - s.count('}')
                    if '{' in s:
                        started = True
                    if started and depth <= 0:
                        break
                    if not started and s.rstrip().endswith(';'):
                        break
                    j += 1
                n = j - i + 1
                if started and n > limit and not cfg_test:
                    out.append((n, f'{path}:{i+1}', name))
                cfg_test = False
                i = j + 1 if started else i + 1
                continue
            if t and not t.startswith('#'):
                cfg_test = False
            i += 1
for n, where, name in sorted(out, reverse=True):
    print(f'{n:5} {where} {name}')
