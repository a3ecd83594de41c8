#!/bin/bash
# suite.sh LABEL CLONE: make test with a timeline and /proc/stat around it
cd $2
b=$(head -1 /proc/stat); s=$(date +%s.%N)
env -u PYTHONDONTWRITEBYTECODE PARKA_TEST_TIMELINE=/tmp/jx/tl-$1.jsonl make test > /tmp/jx/suite-$1.txt 2>&1
rc=$?
e=$(date +%s.%N); a=$(head -1 /proc/stat)
echo "$1: $b | $a" >> /tmp/jx/proc-stat.txt
python3 -c "
b='''$b'''.split()[1:]; a='''$a'''.split()[1:]
d=[int(x)-int(y) for x,y in zip(a,b)]
print('$1 rc $rc make test %.1f s' % ($e-$s), 'busy', (sum(d)-d[3]-d[4])/100, 'idle', (d[3]+d[4])/100)" | tee -a /tmp/jx/suite-summary.txt
grep -E "[0-9]+ (passed|failed)" /tmp/jx/suite-$1.txt | tail -1 | tee -a /tmp/jx/suite-summary.txt
