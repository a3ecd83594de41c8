#!/bin/bash
# cl.sh LABEL DIR: the cluster test alone; the machine's busy CPU-s from /proc/stat
cd $2
b=$(head -1 /proc/stat)
/usr/bin/time -f "%e" -o /tmp/jx/cl-time-$1 env -u PYTHONDONTWRITEBYTECODE .venv/bin/pytest -q -n 0 -p no:cacheprovider tests/integration/spark/test_spark_cluster.py > /tmp/jx/cl-out-$1.txt 2>&1
a=$(head -1 /proc/stat)
python3 -c "
b='''$b'''.split()[1:]; a='''$a'''.split()[1:]
d=[int(x)-int(y) for x,y in zip(a,b)]
busy=(sum(d)-d[3]-d[4])/100
print('$1', 'wall', open('/tmp/jx/cl-time-$1').read().strip(), 'busy CPU-s', busy, 'idle', (d[3]+d[4])/100)"
grep -E "[0-9]+ (passed|failed)" /tmp/jx/cl-out-$1.txt
