"""The CPU check a built library runs before any generated code: the
instruction-set features the code was compiled for (``--target``), read
with ``cpuid`` (and ``xgetbv`` for the OS's AVX / AVX-512 register state),
so a library on a CPU that lacks one returns an error instead of dying of
SIGILL.

Invariant: the features checked are those of the target that this table
knows (every feature of the x86-64 levels; for ``native``, the host's
features found here); other architectures check nothing.

Test hook: a library built with ``TRACEC_AOT_TEST_HOOKS=1`` in the build's
environment also treats the features listed in ``$TRACEC_TEST_CPU_LACKS``
(comma-separated, read at run time) as missing; without that build-time
switch the generated code never reads that variable.
"""
from __future__ import annotations

import os

# LLVM feature name -> (cpuid leaf, subleaf, register 0..3 = eax..edx, bit,
# OS state needed: 0 none, 1 AVX (XCR0 bits 1-2), 2 AVX-512 (XCR0 1-2, 5-7)).
FEATURES = {
    "sse3": (1, 0, 2, 0, 0), "pclmul": (1, 0, 2, 1, 0), "ssse3": (1, 0, 2, 9, 0),
    "fma": (1, 0, 2, 12, 1), "cx16": (1, 0, 2, 13, 0), "sse4.1": (1, 0, 2, 19, 0),
    "sse4.2": (1, 0, 2, 20, 0), "movbe": (1, 0, 2, 22, 0), "popcnt": (1, 0, 2, 23, 0),
    "aes": (1, 0, 2, 25, 0), "xsave": (1, 0, 2, 26, 0), "avx": (1, 0, 2, 28, 1),
    "f16c": (1, 0, 2, 29, 1),
    "bmi": (7, 0, 1, 3, 0), "avx2": (7, 0, 1, 5, 1), "bmi2": (7, 0, 1, 8, 0),
    "avx512f": (7, 0, 1, 16, 2), "avx512dq": (7, 0, 1, 17, 2), "adx": (7, 0, 1, 19, 0),
    "avx512ifma": (7, 0, 1, 21, 2), "avx512cd": (7, 0, 1, 28, 2), "sha": (7, 0, 1, 29, 0),
    "avx512bw": (7, 0, 1, 30, 2), "avx512vl": (7, 0, 1, 31, 2),
    "avx512vbmi": (7, 0, 2, 1, 2), "avx512vbmi2": (7, 0, 2, 6, 2), "gfni": (7, 0, 2, 8, 0),
    "vaes": (7, 0, 2, 9, 1), "vpclmulqdq": (7, 0, 2, 10, 1), "avx512vnni": (7, 0, 2, 11, 2),
    "avx512bitalg": (7, 0, 2, 12, 2), "avx512vpopcntdq": (7, 0, 2, 14, 2),
    "avx512vp2intersect": (7, 0, 3, 8, 2), "avx512fp16": (7, 0, 3, 23, 2),
    "avxvnni": (7, 1, 0, 4, 1), "avx512bf16": (7, 1, 0, 5, 2),
    "sahf": (0x80000001, 0, 2, 0, 0), "lzcnt": (0x80000001, 0, 2, 5, 0),
    "sse4a": (0x80000001, 0, 2, 6, 0), "prfchw": (0x80000001, 0, 2, 8, 0),
    "xop": (0x80000001, 0, 2, 11, 1), "fma4": (0x80000001, 0, 2, 16, 1),
}


def checked_features(feature_string: str) -> list[str]:
    """The features of an LLVM feature string (``+avx2,-sse4a,...``) that
    the generated check tests, in table order."""
    on = {f[1:] for f in feature_string.split(",") if f.startswith("+")}
    return [f for f in FEATURES if f in on]


def c_source(fname: str, features: list[str], target: str) -> str:
    """``int NAME_check_cpu(void)`` (0, or -2 with the message that
    ``NAME_error_message(-2)`` returns) and its helpers."""
    hooks = os.environ.get("TRACEC_AOT_TEST_HOOKS", "") not in ("", "0")
    rows = ",\n".join(f'    {{"{f}", {hex(FEATURES[f][0])}u, {FEATURES[f][1]}u, {FEATURES[f][2]}, '
                      f"{FEATURES[f][3]}, {FEATURES[f][4]}}}" for f in features)
    lines = [
        f"/* CPU features the code needs ({target}), checked before it runs. */",
        "struct tc_feature { const char *name; unsigned leaf, sub; int reg, bit, os; };",
        f"static const struct tc_feature tc_features[] = {{\n{rows or '    {0, 0, 0, 0, 0, 0}'}\n}};",
        f"static const int tc_n_features = {len(features)};",
        "static char tc_cpu_msg[640];",
        "static int tc_cpu_state;   /* 0 unchecked, 1 supported, 2 not */",
        "#if defined(__x86_64__) || defined(__i386__)",
        "#include <cpuid.h>",
        "static unsigned tc_cpuid(unsigned leaf, unsigned sub, int reg) {",
        "    unsigned r[4] = {0, 0, 0, 0};",
        "    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return 0;",
        "    return r[reg];",
        "}",
        "static unsigned long long tc_xcr0(void) {",
        "    if (!(tc_cpuid(1, 0, 2) & (1u << 27))) return 0;   /* no OSXSAVE */",
        "    unsigned lo, hi;",
        '    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));',
        "    return ((unsigned long long)hi << 32) | lo;",
        "}",
        "static int tc_has(const struct tc_feature *f, unsigned long long xcr0) {",
    ]
    if hooks:
        lines += ['    const char *fake = getenv("TRACEC_TEST_CPU_LACKS");',
                  "    if (fake) {   /* test hook (built with TRACEC_AOT_TEST_HOOKS=1) */",
                  "        size_t n = strlen(f->name);",
                  "        for (const char *p = fake; (p = strstr(p, f->name)); p += n)",
                  "            if ((p == fake || p[-1] == ',') && (p[n] == ',' || !p[n])) return 0;",
                  "    }"]
    lines += [
        "    if (f->os == 1 && (xcr0 & 0x6) != 0x6) return 0;",
        "    if (f->os == 2 && (xcr0 & 0xe6) != 0xe6) return 0;",
        "    return (tc_cpuid(f->leaf, f->sub, f->reg) >> f->bit) & 1u;",
        "}",
        "#else",
        "static unsigned long long tc_xcr0(void) { return 0; }",
        "static int tc_has(const struct tc_feature *f, unsigned long long x) "
        "{ (void)f; (void)x; return 1; }",
        "#endif",
        "",
        f"int {fname}_check_cpu(void) {{",
        "    int s = __atomic_load_n(&tc_cpu_state, __ATOMIC_ACQUIRE);",
        "    if (s == 0) {",
        "        unsigned long long xcr0 = tc_xcr0();",
        "        char missing[400] = \"\";",
        "        for (int i = 0; i < tc_n_features; i++) {",
        "            if (tc_has(&tc_features[i], xcr0)) continue;",
        "            size_t used = strlen(missing);",
        "            if (used + strlen(tc_features[i].name) + 3 >= sizeof missing) break;",
        "            if (used) strcat(missing, \", \");",
        "            strcat(missing, tc_features[i].name);",
        "        }",
        "        if (missing[0]) {",
        f'            snprintf(tc_cpu_msg, sizeof tc_cpu_msg, "this library was built for {target} '
        f'(tracec build --target); this CPU lacks %s", missing);',
        "            s = 2;",
        "        } else {",
        "            s = 1;",
        "        }",
        "        __atomic_store_n(&tc_cpu_state, s, __ATOMIC_RELEASE);",
        "    }",
        "    return s == 1 ? 0 : -2;",
        "}",
        "",
    ]
    return "\n".join(lines)
