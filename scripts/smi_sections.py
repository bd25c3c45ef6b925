#!/usr/bin/env python3
"""Per-section GPU clock and power from nvidia-smi samples (scripts/device-run.sh's summary).

usage: smi_sections.py SECTIONS SAMPLES
SECTIONS: lines "<epoch seconds> <label>", in order, the last one the end. SAMPLES: nvidia-smi
--query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits output (local-time timestamps).
Prints one line per section with samples: median SM clock (min-max) and median power.
"""
import datetime
import statistics
import sys

sections = []
for line in open(sys.argv[1]):
    t, _, label = line.strip().partition(" ")
    if t:
        sections.append((float(t), label))
samples = []
for line in open(sys.argv[2]):
    parts = [p.strip() for p in line.split(",")]
    try:
        t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((t, float(parts[1]), float(parts[2])))
    except (ValueError, IndexError):
        continue  # a header, a unit or "[N/A]"
for (t0, label), (t1, _) in zip(sections, sections[1:]):
    s = [x for x in samples if t0 <= x[0] < t1]
    if not s:
        continue
    clocks = [x[1] for x in s]
    power = statistics.median(x[2] for x in s)
    print(f"clock {label[:60]}: SM {statistics.median(clocks):.0f} MHz ({min(clocks):.0f}-{max(clocks):.0f}), "
          f"power {power:.0f} W, {len(s)} samples")
