"""CPU of an idle ``parka ingest``: N new topics of 4 partitions with no data, one daemon of them
(``--topics-regex``; N = 1: the topic alone), its CPU over 60 s once its lanes joined their groups
(after 30 s). One run: ``python idle_fleet.py N`` from the repo's root, a broker at 127.0.0.1:19300.
Output of the runs: idle_fleet.txt."""

import subprocess
import sys
import time
import uuid

import psutil
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = "127.0.0.1:19300"


def main(n: int) -> None:
    prefix = f"idle-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(f"{prefix}-{i:02d}", 4, 1) for i in range(n)]).values():
        future.result()
    lake = f"/tmp/idle-lake-{prefix}"
    command = [sys.executable, "-m", "parka.cli", "ingest"]
    command += ["--topics-regex", f"{prefix}-.*", lake + "/{topic}"] if n > 1 else [f"{prefix}-00", lake + "/t"]
    command += ["-k", BOOTSTRAP, "-l", "1"]
    daemon = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = psutil.Process(daemon.pid)
    time.sleep(30)  # the lanes start and join their groups
    cpu0, t0 = sum(proc.cpu_times()[:2]), time.time()
    time.sleep(60)
    cpu1 = sum(proc.cpu_times()[:2])
    print(f"{n} topics idle: {(cpu1 - cpu0) / (time.time() - t0):.3f} cores, threads {proc.num_threads()}")
    daemon.terminate()
    daemon.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]))
