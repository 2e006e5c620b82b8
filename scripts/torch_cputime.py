#!/usr/bin/python3
"""Runs the PyTorch reference (path in argv[1], its flags after) with its
timer time.perf_counter replaced by time.process_time, so that its RESULT
line's examples_per_s counts examples per CPU-second of the process rather
than per wall-second: the figure to compare with dpfl's examples_per_cpu_s
on a machine shared with other work. The reference itself is unchanged."""
import importlib.util, sys, time

path = sys.argv[1]
sys.argv = [path] + sys.argv[2:]
spec = importlib.util.spec_from_file_location("torch_fedavg", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
mod.time.perf_counter = time.process_time
mod.main()
