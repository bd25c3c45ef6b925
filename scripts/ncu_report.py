"""Reads the ncu --metrics reports that scripts/ncu-gemm-*.sh write: a section per run, opened by a line
'== <label>', then ncu's '    <metric>  <unit>  <value>' lines. read(path) gives [(label, {metric: value})] with
times in us, sizes in bytes, cycles in cycles and rates in Hz (or cycles per second)."""
import re

SCALE = {
    "ms": 1e3, "msecond": 1e3, "us": 1, "usecond": 1, "ns": 1e-3, "nsecond": 1e-3,
    "Gbyte": 1e9, "Mbyte": 1e6, "Kbyte": 1e3, "byte": 1,
    "Gcycle": 1e9, "Mcycle": 1e6, "Kcycle": 1e3, "cycle": 1,
    "Ghz": 1e9, "Mhz": 1e6, "hz": 1,
    "cycle/second": 1, "cycle/usecond": 1e6, "cycle/nsecond": 1e9, "Mcycle/second": 1e6, "Gcycle/second": 1e9,
}


def read(path):
    rows = []
    for line in open(path):
        if line.startswith("== "):
            rows.append((line[3:].strip(), {}))
            continue
        m = re.match(r"\s+(\S+)\s+(\S+)\s+([\d,.]+)\s*$", line)
        if m and rows:
            rows[-1][1][m.group(1)] = float(m.group(3).replace(",", "")) * SCALE.get(m.group(2), 1)
    return rows
