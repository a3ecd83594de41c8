"""CPU of one `parka ingest --catalog` forked from a server with reliability/_zygote.py's preload:
the child's rusage from os.wait4. Usage (a broker on 127.0.0.1:19300 with topic drvtopic1 of 21
segments): PYTHONPATH=. python forked_child.py PRELOAD LABEL, PRELOAD 1 to add the extra imports
the commit of 2026-11-30 put into _preload (run before that commit with 0 and 1, the same)."""

import os
import runpy
import sys
import time

from reliability._zygote import _preload

_preload()
if sys.argv[1] == "1":
    import importlib

    for m in [
        "parka.lake.iceberg",
        "pyiceberg.catalog.sql",
        "pyiceberg.catalog.rest",
        "sqlalchemy",
        "parka.metrics",
        "pyiceberg.io.pyarrow",
        "sqlalchemy.dialects.sqlite.pysqlite",
    ]:
        importlib.import_module(m)
for i in range(4):
    pid = os.fork()
    if pid == 0:
        fd = os.open(f"/tmp/zy5log-{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.argv = [
            "-m",
            "ingest",
            "drvtopic1",
            f"db.v{sys.argv[1]}{sys.argv[2]}{i}",
            "-k",
            "127.0.0.1:19300",
            "--end-at-latest",
            "--catalog",
            "test",
            "--catalog-option",
            "warehouse=/tmp/wh1",
        ]
        sys.modules.pop("parka.cli", None)
        runpy.run_module("parka.cli", run_name="__main__", alter_sys=True)
        os._exit(0)
    t = time.time()
    _, status, ru = os.wait4(pid, 0)
    print(f"preload+={sys.argv[1]} run {i}: user {ru.ru_utime:.2f} sys {ru.ru_stime:.2f} wall {time.time() - t:.2f}")
